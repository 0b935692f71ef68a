// Command amudprun runs any udpconduit program as a job, the way AMUDP's
// launcher of the same name does:
//
//	amudprun -np N [-spawn L|S|C] [-v] [-x NAME[=VALUE]]... prog [args...]
//
// -n N is -np N, as srun and mpiexec users type it; --version prints the
// version of the udpconduit it was built from.
//
// It is the job's console: it spawns N workers running prog with args,
// serves them and exits with the job's exit code. -spawn overrides
// GASNET_SPAWNFN and -v sets GASNET_VERBOSEENV; -x, as mpirun's, gives
// every worker the console's variable NAME, or sets it to VALUE (it adds to
// GASNET_FORWARD_ENV; remote workers need it). Every other setting comes
// from the GASNET_* / AMUDP_* environment, as for `prog N args...`.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/udpconduit/udpconduit/spawn"
)

const usage = "usage: amudprun -np N (or -n N) [-spawn L|S|C] [-v] [-l] [-output-dir DIR] [-x NAME[=VALUE]]... prog [args...] | --version"

func main() {
	os.Exit(run(os.Args[1:]))
}

func fail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "amudprun: "+format+"\n", a...)
	return 1
}

func run(argv []string) int {
	fs := flag.NewFlagSet("amudprun", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	np := fs.String("np", "", "number of workers, N")
	nShort := fs.String("n", "", "number of workers, N (as -np)")
	version := fs.Bool("version", false, "print the version of udpconduit this was built from")
	sp := fs.String("spawn", "", "spawner: L (this host), S (ssh) or C (custom command); overrides GASNET_SPAWNFN")
	verbose := fs.Bool("v", false, "print every setting in force (GASNET_VERBOSEENV=1)")
	label := fs.Bool("l", false, "prefix each output line with its rank, as srun -l (GASNET_OUTPUT_LABEL=1)")
	outDir := fs.String("output-dir", "", "write each rank's output to DIR/rank.R.stdout and .stderr (GASNET_OUTPUT_DIR=DIR)")
	var forward []string
	fs.Func("x", "give every worker the variable NAME (the console's value), or set it to VALUE; repeatable", func(v string) error {
		name, val, set := strings.Cut(v, "=")
		if name == "" || strings.ContainsAny(name, " ,\t") {
			return fmt.Errorf("-x %s: accepted: NAME or NAME=VALUE", v)
		}
		if set {
			os.Setenv(name, val)
		} else if _, ok := os.LookupEnv(name); !ok {
			return fmt.Errorf("-x %s: %s is not set in this environment; accepted: the name of a set variable, or NAME=VALUE", v, name)
		}
		forward = append(forward, name)
		return nil
	})
	if err := fs.Parse(argv); err != nil {
		if err == flag.ErrHelp {
			fmt.Println(usage)
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return 0
		}
		return fail("%v; %s", err, usage)
	}
	if *version {
		fmt.Println("amudprun " + versionOf())
		return 0
	}
	switch {
	case *np != "" && *nShort != "" && *np != *nShort:
		return fail("-np %s and -n %s disagree: give the number of workers once; %s", *np, *nShort, usage)
	case *np == "":
		*np = *nShort
	}
	if *np == "" {
		return fail("missing -np N; %s", usage)
	}
	n, err := spawn.ParseN([]string{"amudprun", *np}, "")
	if err != nil {
		return fail("-np %s: accepted: a positive integer; %s", *np, usage)
	}
	if fs.NArg() == 0 {
		return fail("missing the program to run; %s", usage)
	}
	switch s := strings.ToUpper(*sp); s {
	case "":
	case "L", "S", "C":
		os.Setenv("GASNET_SPAWNFN", s) // workers see the console's settings
	default:
		return fail("-spawn %s: accepted: L (this host), S (ssh) or C (custom command)", *sp)
	}
	if *verbose {
		os.Setenv("GASNET_VERBOSEENV", "1")
	}
	if *label {
		os.Setenv("GASNET_OUTPUT_LABEL", "1")
	}
	if *outDir != "" {
		os.Setenv("GASNET_OUTPUT_DIR", *outDir)
	}
	if len(forward) > 0 {
		list := os.Getenv("GASNET_FORWARD_ENV")
		if v, ok := os.LookupEnv("AMUDP_FORWARD_ENV"); ok && list == "" {
			list = v
		}
		os.Setenv("GASNET_FORWARD_ENV", strings.TrimSpace(list+" "+strings.Join(forward, " ")))
	}
	prog, err := exec.LookPath(fs.Arg(0))
	if err == nil {
		prog, err = filepath.Abs(prog)
	}
	if err != nil {
		return fail("program %s: %v", fs.Arg(0), err)
	}
	cfg, src, err := spawn.LoadConfig()
	if err != nil {
		return fail("%v", err)
	}
	return spawn.Console(cfg, src, n, prog, fs.Args()[1:])
}

// versionOf says which udpconduit the binary was built from: the module's
// version, and the commit when built from a checkout ("(devel)").
func versionOf() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return bi.Main.Path + " " + v
}
