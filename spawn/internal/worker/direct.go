package worker

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/pmi"
	"github.com/udpconduit/udpconduit/spawn/varenc"
)

// DialPMI makes this task a worker of a job that a launcher serving PMI
// started directly (srun --mpi=pmi2, mpiexec.hydra; DESIGN.md §9.1): there
// is no console. Its rank and the job's size are the launcher's; Join
// exchanges the ranks' joins (and rank 0's secret) through the launcher's
// key-value store, and every rank then has the whole address table. Its configuration is its environment,
// which the launcher passes on.
func DialPMI(e pmi.Env) (*Worker, *envconf.Config, map[string]envconf.Source, error) {
	cfg, src, err := envconf.Load()
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := pmi.Dial(e, cfg.ConnectTimeout)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("rank %d of %d: the launcher's PMI: %w", e.Rank, e.Size, err)
	}
	w := &Worker{pmi: c, shmSet: src["GASNET_SUPERNODE_MAXSIZE"].Var != ""}
	if cfg.WorkerIP != "" {
		if w.LocalIP, err = envconf.AddrOnSubnet(cfg.WorkerIP); err != nil {
			return nil, nil, nil, err
		}
	} else {
		w.LocalIP = defaultAddr()
	}
	return w, cfg, src, nil
}

// defaultAddr is the address a directly launched worker is known by in
// the table when GASNET_WORKERIP is not set (it publishes its host's
// others too, DESIGN.md §7.2): the source of the host's default route,
// else its first address of global scope, else loopback.
func defaultAddr() netip.Addr {
	for _, probe := range []string{"192.0.2.1:9", "[2001:db8::1]:9"} { // documentation addresses: a route lookup, nothing sent
		if c, err := net.Dial("udp", probe); err == nil {
			a, _ := netip.ParseAddrPort(c.LocalAddr().String())
			c.Close()
			if ip := a.Addr().Unmap(); ip.IsGlobalUnicast() {
				return ip
			}
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().IsGlobalUnicast() {
					return ip.Unmap()
				}
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// Direct reports whether the worker runs without a console, started by a
// launcher that serves PMI: every rank has the whole table from Join, and
// the job's end is the ranks' own (SetPeerExit).
func (w *Worker) Direct() bool { return w.pmi != nil }

// SetPeerExit sets the function by which a directly launched rank that
// calls Exit or aborts tells the other ranks the job's code before it
// ends (the console does it otherwise), waiting at most grace for them to
// take it; it reports whether every one did. They end with it (PeerExit).
func (w *Worker) SetPeerExit(f func(code int, grace time.Duration) bool) { w.peerExit.Store(&f) }

// PeerExit ends this rank with code, which another rank of a directly
// launched job exited with, as the console's Terminate does: at the
// program's next call into the library, or after the grace period (ExitNow,
// which tells the others in turn). A rank whose own Exit is under way goes
// on with it.
func (w *Worker) PeerExit(code int) {
	if w.exiting.Load() {
		return
	}
	w.terminate(code)
}

// readJoins reads every rank's Join from the launcher's store: the
// table, and each rank's CPU count and affinity mask.
func readJoins(c *pmi.Client, size int) (ctl.Table, []int, []string, error) {
	tab := ctl.Table{Addrs: make([]netip.AddrPort, size), Hosts: make([]string, size), Inboxes: make([]string, size), Nets: make([][]ctl.Net, size)}
	cpus, masks := make([]int, size), make([]string, size)
	for r := range size {
		b, err := c.Get("j" + strconv.Itoa(r))
		if err != nil {
			return ctl.Table{}, nil, nil, fmt.Errorf("rank 0: rank %d's address from the launcher: %w", r, err)
		}
		var o ctl.Join
		if err := ctl.DecodeBody(b, &o); err != nil {
			return ctl.Table{}, nil, nil, fmt.Errorf("rank 0: rank %d's address from the launcher is malformed: %w", r, err)
		}
		a, err := netip.ParseAddrPort(o.UDP)
		if err != nil || a.Port() == 0 || o.Rank != r {
			return ctl.Table{}, nil, nil, fmt.Errorf("rank 0: rank %d's address from the launcher is malformed (%q, rank %d)", r, o.UDP, o.Rank)
		}
		tab.Addrs[r], tab.Hosts[r], tab.Inboxes[r], tab.Nets[r] = a, o.Host, o.Inbox, o.Nets
		cpus[r], masks[r] = o.CPUs, o.Mask
	}
	return tab, cpus, masks, nil
}

// joinPMI is Join under direct launch.
func (w *Worker) joinPMI(cfg *envconf.Config, udp netip.AddrPort, inbox string, nets []ctl.Net) error {
	c := w.pmi
	rank, size := c.Rank(), c.Size()
	name, _ := os.Hostname()
	jn := ctl.Join{Rank: rank, Index: rank, Host: hostIdentity(cfg.HostDetect, udp.Addr()), Name: name, PID: os.Getpid(),
		UDP: udp.String(), CPUs: runtime.NumCPU(), Mask: cpuMask(), Inbox: inbox, Nets: nets[:min(len(nets), ctl.MaxNets)]}
	if err := c.Put("j"+strconv.Itoa(rank), jn.AppendBody(nil)); err != nil {
		return fmt.Errorf("rank %d: publishing its address through the launcher: %w", rank, err)
	}
	if rank == 0 {
		var sb [16]byte
		rand.Read(sb[:])
		if err := c.Put("secret", []byte(hex.EncodeToString(sb[:]))); err != nil {
			return fmt.Errorf("rank 0: publishing the job secret through the launcher: %w", err)
		}
	}
	if err := c.Fence(); err != nil {
		return fmt.Errorf("rank %d of %d: waiting for every task at the launcher's fence (GASNET_CONNECT_TIMEOUT=%v): %w; a task of the job did not start, or did not reach conduit.Init", rank, size, cfg.ConnectTimeout, err)
	}
	secret, err := c.Get("secret")
	if err != nil || len(secret) == 0 {
		return fmt.Errorf("rank %d: reading the job secret from the launcher: %v", rank, err)
	}
	// Rank 0 reads every Join and publishes the table with the ranks'
	// CPUs; the others read that once, after a second fence: N reads of
	// the launcher's store and one value per rank, instead of N² reads.
	var tab ctl.Table
	var cpus []int
	var masks []string
	if rank == 0 {
		if tab, cpus, masks, err = readJoins(c, size); err != nil {
			return err
		}
		b := varenc.AppendBytes(nil, ctl.EncodeTable(tab))
		for r := range size {
			b = varenc.AppendString(varenc.AppendInt(b, cpus[r]), masks[r])
		}
		if err := c.Put("table", b); err != nil {
			return fmt.Errorf("rank 0: publishing the address table through the launcher: %w", err)
		}
	}
	if err := c.Fence(); err != nil {
		return fmt.Errorf("rank %d of %d: waiting for rank 0's table at the launcher's fence (GASNET_CONNECT_TIMEOUT=%v): %w", rank, size, cfg.ConnectTimeout, err)
	}
	if rank != 0 {
		b, err := c.Get("table")
		if err != nil {
			return fmt.Errorf("rank %d: the address table from the launcher: %w", rank, err)
		}
		d := varenc.Decoder{B: b}
		blob := d.Bytes()
		cpus, masks = make([]int, size), make([]string, size)
		for r := range size {
			cpus[r], masks[r] = d.Int(), d.String()
		}
		if d.Bad || len(d.B) != 0 {
			return fmt.Errorf("rank %d: the address table from the launcher is malformed", rank)
		}
		if tab, err = ctl.DecodeTable(blob, size); err != nil {
			return fmt.Errorf("rank %d: %w", rank, err)
		}
	}
	tab, place := ctl.Place(tab, cpus, masks, func(ranks, cpus int) bool {
		return ctl.SharesMemory(cfg.SupernodeMax, w.shmSet, ranks, cpus)
	})
	h := tab.Hosts[rank]
	w.wel = ctl.Welcome{Rank: rank, Size: size, HostCount: place.OnHost[h], HostCPUs: place.CPUs[h], Crowded: place.Crowded}
	w.blob = ctl.EncodeTable(tab)
	if w.tab, err = ctl.DecodeTable(w.blob, size); err != nil { // the form every rank of a relayed table has
		return err
	}
	w.Secret = secret
	return nil
}
