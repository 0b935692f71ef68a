// Package envconf is udpconduit's configuration: every setting as a field
// of Config with its GASNET_ name, default and range in the field's tags
// and its description in descriptions (the one source of truth: the
// README's table and -h are generated from them), read from the environment as GASNET_X, AMUDP_X or
// the documented bare X, checked against its range with a one-line error
// that names the variable and what it accepts, and the warning for a
// GASNET_/AMUDP_ variable that no setting has.
package envconf

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/udpconduit/udpconduit/retransmit"
)

// Config is every setting of udpconduit, read from the environment. With
// descriptions (descs.go) it is the only source of truth: the README's
// variable table is generated from the two (DESIGN.md §10). Each variable is read as GASNET_X, then
// AMUDP_X, and bare X only where the `bare` tag says the reference documents
// it.
type Config struct {
	SpawnFn       string `envconfig:"GASNET_SPAWNFN" default:""`
	SSHCmd        string `envconfig:"GASNET_SSH_CMD" default:"" bare:"SSH_CMD"`
	SSHServers    string `envconfig:"GASNET_SSH_SERVERS" default:"" bare:"SSH_SERVERS"`
	SSHOptions    string `envconfig:"GASNET_SSH_OPTIONS" default:"" bare:"SSH_OPTIONS"`
	SSHNodeFile   string `envconfig:"GASNET_SSH_NODEFILE" default:"" bare:"SSH_NODEFILE"`
	SSHCache      string `envconfig:"GASNET_SSH_CACHE" default:".cache/udpconduit/bin"`
	SSHOutDegree  int    `envconfig:"GASNET_SSH_OUT_DEGREE" default:"0" range:"1..4096" special:"0=no tree"`
	SSHRemotePath string `envconfig:"GASNET_SSH_REMOTE_PATH" default:"" bare:"SSH_REMOTE_PATH"`
	CSpawnCmd     string `envconfig:"GASNET_CSPAWN_CMD" default:"" bare:"CSPAWN_CMD"`
	CSpawnServers string `envconfig:"GASNET_CSPAWN_SERVERS" default:"" bare:"CSPAWN_SERVERS"`
	CSpawnRoute   bool   `envconfig:"GASNET_CSPAWN_ROUTE_OUTPUT" default:"false"`

	NetworkDepth int  `envconfig:"GASNET_NETWORKDEPTH" default:"128" range:"1..1024"`
	RecvDepth    int  `envconfig:"GASNET_RECVDEPTH" default:"0" range:"1..65534" special:"0=the default"`
	SendDepth    int  `envconfig:"GASNET_SENDDEPTH" default:"0" range:"1..1048576" special:"0=the default,-1=unlimited"`
	AuthPayload  bool `envconfig:"GASNET_AUTH_PAYLOAD" default:"true"`
	Encrypt      bool `envconfig:"GASNET_ENCRYPT" default:"false"`
	SockBufInit  int  `envconfig:"GASNET_SOCKETBUFFER_INITIAL" default:"1048576" range:"4096..1073741824" special:"0=the system's default" unit:"bytes"`
	SockBufMax   int  `envconfig:"GASNET_SOCKETBUFFER_MAX" default:"4194304" range:"4096..1073741824" unit:"bytes"`

	ReqTimeoutMax     int64  `envconfig:"GASNET_REQUESTTIMEOUT_MAX" default:"30000000" range:"1000..3600000000" special:"0=never give up"`
	ReqTimeoutInitial int64  `envconfig:"GASNET_REQUESTTIMEOUT_INITIAL" default:"100000" range:"100..60000000"`
	ReqTimeoutBackoff uint32 `envconfig:"GASNET_REQUESTTIMEOUT_BACKOFF" default:"2" range:"1..64"`

	RouteOutput bool   `envconfig:"GASNET_ROUTE_OUTPUT" default:"true"`
	CPUBind     bool   `envconfig:"GASNET_CPU_BIND" default:"true"`
	OutputLabel bool   `envconfig:"GASNET_OUTPUT_LABEL" default:"false"`
	OutputDir   string `envconfig:"GASNET_OUTPUT_DIR" default:""`
	LineBufSize int    `envconfig:"GASNET_LINEBUFFERSZ" default:"1024" range:"1..1048576" special:"0=unbuffered" unit:"bytes"`
	MasterIP    string `envconfig:"GASNET_MASTERIP" default:""`
	WorkerIP    string `envconfig:"GASNET_WORKERIP" default:""`
	ForwardEnv  string `envconfig:"GASNET_FORWARD_ENV" default:""`
	EnvCmd      string `envconfig:"GASNET_ENV_CMD" default:"env"`
	HostDetect  string `envconfig:"GASNET_HOST_DETECT" default:"hostname"`
	// SupernodeMax bounds the groups of a host's ranks that share memory.
	// PSHMDepth sizes each rank's shared-memory inbox.
	PSHMDepth    int    `envconfig:"GASNET_PSHM_NETWORK_DEPTH" default:"64" range:"4..8192"`
	SupernodeMax int    `envconfig:"GASNET_SUPERNODE_MAXSIZE" default:"0" range:"0..1048576"`
	WorkerRank   string `envconfig:"GASNET_WORKER_RANK" default:""`
	VerboseEnv   bool   `envconfig:"GASNET_VERBOSEENV" default:"false"`
	Stats        bool   `envconfig:"GASNET_STATS" default:"false"`
	VerboseRoute bool   `envconfig:"GASNET_VERBOSE_ROUTES" default:"false"`
	DirectLaunch bool   `envconfig:"GASNET_DIRECT_LAUNCH" default:"true"`

	RcvThread       bool          `envconfig:"GASNET_RCV_THREAD" default:"false"`
	ConnectTimeout  time.Duration `envconfig:"GASNET_CONNECT_TIMEOUT" default:"60s" range:"100ms..24h"`
	PollSpin        time.Duration `envconfig:"GASNET_POLL_SPIN" default:"1ms" range:"0s..1s" special:"-1ns=spin forever"`
	ExitTimeout     time.Duration `envconfig:"GASNET_EXIT_TIMEOUT" default:"2s" range:"100ms..1h"`
	Liveness        time.Duration `envconfig:"GASNET_LIVENESS_TIMEOUT" default:"30s" range:"1s..24h" special:"0=never"`
	PSHMBarrierHier bool          `envconfig:"GASNET_PSHM_BARRIER_HIER" default:"true"`
	Barrier         string        `envconfig:"GASNET_BARRIER" default:""`
	HangWarn        time.Duration `envconfig:"GASNET_HANG_WARN" default:"10s" range:"100ms..24h" special:"0=never"`
}

// Source says where a setting's value came from.
type Source struct {
	Var   string // the variable that set it, or "" for the default
	Value string
}

// variables lists the full names of Config's fields with their aliases
// (made once: every process reads its configuration at start).
var variables = sync.OnceValue(listVariables)

func listVariables() []struct{ name, bare, field string } {
	t := reflect.TypeOf(Config{})
	out := make([]struct{ name, bare, field string }, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		out = append(out, struct{ name, bare, field string }{f.Tag.Get("envconfig"), f.Tag.Get("bare"), f.Name})
	}
	return out
}

// ResolveAliases returns, for each GASNET_X variable of Config, which
// variable of env sets it: GASNET_X first, then AMUDP_X, then the bare name
// where documented. env is in os.Environ form.
func ResolveAliases(env []string) map[string]Source {
	m := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	out := map[string]Source{}
	for _, v := range variables() {
		suffix := strings.TrimPrefix(v.name, "GASNET_")
		for _, cand := range []string{v.name, "AMUDP_" + suffix, v.bare} {
			if cand == "" {
				continue
			}
			if val, ok := m[cand]; ok {
				out[v.name] = Source{Var: cand, Value: val}
				break
			}
		}
	}
	return out
}

// Load reads the configuration from the process environment. A
// malformed value gives an error naming the variable, the value and what is
// accepted.
func Load() (*Config, map[string]Source, error) {
	return LoadEnv(os.Environ())
}

func LoadEnv(env []string) (*Config, map[string]Source, error) {
	src := ResolveAliases(env)
	// envconfig reads the process environment; point the full names at the
	// resolved values for the duration of the parse, the integers as
	// ParseInt reads them (envconfig's own parser takes 010 for octal).
	var restore []func()
	defer func() {
		for _, f := range restore {
			f()
		}
	}()
	for i, v := range variables() {
		old, had := os.LookupEnv(v.name)
		s, ok := src[v.name]
		switch {
		case ok:
			val, good := envconfigValue(i, s.Value)
			if !good {
				return nil, nil, fmt.Errorf("%s=%q: accepted: %s", s.Var, s.Value, acceptedField(v.field))
			}
			os.Setenv(v.name, val)
		case had:
			os.Unsetenv(v.name)
		default:
			continue
		}
		name := v.name
		restore = append(restore, func() {
			if had {
				os.Setenv(name, old)
			} else {
				os.Unsetenv(name)
			}
		})
	}
	var c Config
	if err := envconfig.Process("", &c); err != nil {
		var pe *envconfig.ParseError
		if ok := asParseError(err, &pe); ok {
			return nil, nil, fmt.Errorf("%s=%q: accepted: %s", DisplayName(src, pe.KeyName), pe.Value, acceptedField(pe.FieldName))
		}
		return nil, nil, err
	}
	if err := c.validate(src); err != nil {
		return nil, nil, err
	}
	return &c, src, nil
}

func asParseError(err error, pe **envconfig.ParseError) bool {
	p, ok := err.(*envconfig.ParseError)
	if ok {
		*pe = p
	}
	return ok
}

func DisplayName(src map[string]Source, name string) string {
	if s, ok := src[name]; ok && s.Var != "" {
		return s.Var
	}
	return name
}

func (c *Config) validate(src map[string]Source) error {
	bad := func(name string, val any, what string) error {
		return fmt.Errorf("%s=%v: accepted: %s", DisplayName(src, name), val, what)
	}
	switch strings.ToUpper(c.SpawnFn) {
	case "", "L", "S", "C":
		c.SpawnFn = strings.ToUpper(c.SpawnFn)
	default:
		return bad("GASNET_SPAWNFN", c.SpawnFn, "L (local), S (ssh) or C (custom command)")
	}
	if err := c.checkRanges(src); err != nil {
		return err
	}
	if err := c.checkGiveUp(src); err != nil {
		return err
	}
	if c.SockBufInit > c.SockBufMax {
		// A maximum set below the initial size's default lowers it; an
		// initial size set above the maximum is refused.
		if _, set := src["GASNET_SOCKETBUFFER_INITIAL"]; !set {
			c.SockBufInit = c.SockBufMax
		} else {
			return fmt.Errorf("%s=%d: accepted: at most %s=%d", DisplayName(src, "GASNET_SOCKETBUFFER_INITIAL"), c.SockBufInit,
				DisplayName(src, "GASNET_SOCKETBUFFER_MAX"), c.SockBufMax)
		}
	}
	switch strings.ToUpper(c.Barrier) {
	case "", "AMDISSEM", "AMCENTRAL", "AMTREE":
		c.Barrier = strings.ToUpper(c.Barrier)
	case "DISSEM":
		c.Barrier = "AMDISSEM"
	default:
		return bad("GASNET_BARRIER", c.Barrier, "AMDISSEM (or DISSEM), AMCENTRAL or AMTREE, or empty for the default")
	}
	switch c.HostDetect {
	case "conduit", "hostid", "hostname":
	default:
		return bad("GASNET_HOST_DETECT", c.HostDetect, "conduit, hostid or hostname")
	}
	if a, err := netip.ParseAddr(c.MasterIP); c.MasterIP != "" && (err != nil || a.Zone() != "") {
		return bad("GASNET_MASTERIP", c.MasterIP, "an IPv4 or IPv6 address of this host, such as 10.77.0.254 or fd00:77::fe (0.0.0.0 or :: for all)")
	}
	if c.WorkerIP != "" && !validSubnets(c.WorkerIP) {
		return bad("GASNET_WORKERIP", c.WorkerIP, "CIDRs such as 10.77.0.0/24 or fd00::/64, addresses, or address prefixes such as 10.77., separated by commas")
	}
	if c.WorkerRank != "" && !ValidRankSpec(c.WorkerRank) {
		return bad("GASNET_WORKER_RANK", c.WorkerRank, "a decimal integer >= 0 or the name of a variable holding one, such as SLURM_PROCID")
	}
	return nil
}

// minGiveUp is the shortest give-up time (a silent peer's requests are
// undeliverable after it) the request timeouts may add up to: shorter ones
// would abort healthy jobs whose peer is merely descheduled for a moment.
const minGiveUp = time.Second

// checkGiveUp checks the request timeouts: an initial wait above the
// maximum is refused when the user set it, and lowered to the maximum
// when only the maximum was set (the default initial wait is the one in
// conflict); a schedule that gives up in less than minGiveUp is refused,
// naming the time it would give up after.
func (c *Config) checkGiveUp(src map[string]Source) error {
	if c.ReqTimeoutMax == 0 {
		return nil // never give up
	}
	if c.ReqTimeoutInitial > c.ReqTimeoutMax {
		if _, set := src["GASNET_REQUESTTIMEOUT_INITIAL"]; !set {
			c.ReqTimeoutInitial = c.ReqTimeoutMax
		} else {
			return fmt.Errorf("%s=%d: accepted: at most %s=%d", DisplayName(src, "GASNET_REQUESTTIMEOUT_INITIAL"), c.ReqTimeoutInitial,
				DisplayName(src, "GASNET_REQUESTTIMEOUT_MAX"), c.ReqTimeoutMax)
		}
	}
	rc := retransmit.Config{Initial: time.Duration(c.ReqTimeoutInitial) * time.Microsecond, Backoff: c.ReqTimeoutBackoff,
		Max: time.Duration(c.ReqTimeoutMax) * time.Microsecond}
	if g := rc.GiveUpAfter(); g < minGiveUp {
		return fmt.Errorf("%s=%d with %s=%d and %s=%d gives up on a silent peer after %v: accepted: settings whose give-up time is at least %v (raise the maximum), or %s=0 to never give up",
			DisplayName(src, "GASNET_REQUESTTIMEOUT_MAX"), c.ReqTimeoutMax, DisplayName(src, "GASNET_REQUESTTIMEOUT_INITIAL"), c.ReqTimeoutInitial,
			DisplayName(src, "GASNET_REQUESTTIMEOUT_BACKOFF"), c.ReqTimeoutBackoff, g, minGiveUp, DisplayName(src, "GASNET_REQUESTTIMEOUT_MAX"))
	}
	return nil
}

// validSubnets reports whether s is a list (Subnets) of at least one CIDR,
// address or address prefix.
func validSubnets(s string) bool {
	l := Subnets(s)
	for _, e := range l {
		if !validSubnet(e) {
			return false
		}
	}
	return len(l) > 0
}

// validSubnet reports whether s is a CIDR, an address or an address prefix
// (see AddrOnSubnet).
func validSubnet(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF.:", r) {
			return false
		}
	}
	return true
}

// ValidRankSpec reports whether s is a rank (a decimal integer >= 0, as
// ParseInt reads it) or a variable name.
func ValidRankSpec(s string) bool {
	if n, err := ParseInt(s, false); err == nil {
		return n >= 0
	}
	for i, r := range s {
		letter := r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z')
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// ChooseSpawner returns the spawner to use: GASNET_SPAWNFN, else S when
// SSH_SERVERS is set, C when CSPAWN_CMD is set, otherwise L (DESIGN.md §1).
func (c *Config) ChooseSpawner() string {
	switch {
	case c.SpawnFn != "":
		return c.SpawnFn
	case c.SSHServers != "" || c.SSHNodeFile != "":
		return "S"
	case c.CSpawnCmd != "":
		return "C"
	}
	return "L"
}

// Describe prints every setting in force and where it came from, one per
// line, for GASNET_VERBOSEENV.
func (c *Config) Describe(src map[string]Source) []string {
	rv := reflect.ValueOf(*c)
	var lines []string
	for i, v := range variables() {
		from := "default"
		if s, ok := src[v.name]; ok {
			from = s.Var
		}
		lines = append(lines, fmt.Sprintf("%-32s = %-12v (%s)", v.name, rv.Field(i).Interface(), from))
	}
	sort.Strings(lines)
	return lines
}

// Table renders the variable table of the README from Config's tags.
func Table() string {
	var b strings.Builder
	b.WriteString("| variable | default | also read as | accepted | meaning |\n|---|---|---|---|---|\n")
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("envconfig")
		aliases := "AMUDP_" + strings.TrimPrefix(name, "GASNET_")
		if bare := f.Tag.Get("bare"); bare != "" {
			aliases += ", " + bare
		}
		def := f.Tag.Get("default")
		if def == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s |\n", name, def, aliases, accepted(f), strings.ReplaceAll(Description(name), "|", "\\|"))
	}
	return b.String()
}

// helpVars are the settings -h shows; the rest are in the README's table.
var helpVars = []string{"GASNET_SPAWNFN", "GASNET_SSH_SERVERS", "GASNET_CSPAWN_CMD", "GASNET_ROUTE_OUTPUT",
	"GASNET_NETWORKDEPTH", "GASNET_EXIT_TIMEOUT", "GASNET_STATS", "GASNET_VERBOSEENV"}

// Help is what a program prints for -h or --help as its first argument:
// its usage line, what a job is, and the main settings with their
// defaults, from Config's tags.
func Help(prog, usage string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", usage)
	fmt.Fprintf(&b, "Runs a udpconduit job: this process is the console, and starts N workers\n"+
		"running this program with the arguments after N as their argv; it routes\n"+
		"their output and exits with the job's code.\n\n")
	fmt.Fprintf(&b, "Main settings (environment variables, also read with the AMUDP_ prefix):\n")
	t := reflect.TypeOf(Config{})
	for _, name := range helpVars {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Tag.Get("envconfig") != name {
				continue
			}
			def := "default " + f.Tag.Get("default")
			switch {
			case name == "GASNET_SPAWNFN":
				def = "default L; S when GASNET_SSH_SERVERS is set, C when GASNET_CSPAWN_CMD is, or inside a SLURM allocation"
			case f.Tag.Get("default") == "":
				def = "unset by default"
			}
			desc := strings.TrimPrefix(Description(name), "ours: ")
			fmt.Fprintf(&b, "  %s (%s)\n%s", name, def, wrap(desc, "      ", 78))
		}
	}
	fmt.Fprintf(&b, "\nThe other settings, with their defaults:\n")
	var line string
	for _, v := range variables() {
		if slices.Contains(helpVars, v.name) {
			continue
		}
		f, _ := t.FieldByName(v.field)
		item := v.name + "=" + cmp.Or(f.Tag.Get("default"), `""`)
		if len(line)+len(item)+1 > 76 {
			b.WriteString("  " + line + "\n")
			line = ""
		}
		line = strings.TrimSpace(line + " " + item)
	}
	b.WriteString("  " + line + "\n")
	fmt.Fprintf(&b, "\nGASNET_VERBOSEENV=1 %s N prints every setting in force and where it\n"+
		"came from; a value a setting does not accept is refused, saying what it\n"+
		"accepts.\n", filepath.Base(prog))
	return b.String()
}

// wrap breaks text into lines of at most width bytes (longer words stand
// alone), each starting with indent.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(indent)+len(line)+1+len(w) > width {
			b.WriteString(indent + line + "\n")
			line = ""
		}
		line = strings.TrimSpace(line + " " + w)
	}
	if line != "" {
		b.WriteString(indent + line + "\n")
	}
	return b.String()
}
