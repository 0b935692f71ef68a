package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// externalMain is a user's program in a module of its own: a ring of
// requests, a barrier and a sum over every rank.
const externalMain = `package main

import (
	"fmt"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/conduit"
)

func main() {
	conduit.Init()
	var got atomic.Int32
	conduit.Attach([]conduit.HandlerEntry{{Index: 200, Fn: func(t *conduit.Token, a []uint32, _ []byte) { got.Store(int32(a[0])) }}}, 0)
	me, n := conduit.Rank(), conduit.Size()
	if err := conduit.RequestShort((me+1)%n, 200, uint32(me)); err != nil {
		panic(err)
	}
	conduit.WaitUntil(func() bool { return got.Load() == int32((me+n-1)%n) })
	conduit.Barrier()
	sum, err := conduit.AllReduce(conduit.World(), conduit.Sum, []uint64{uint64(me)})
	if err != nil {
		panic(err)
	}
	fmt.Printf("rank %d heard from %d, sum %d\n", me, got.Load(), sum[0])
	conduit.Finalize(0)
}
`

// TestExternalModule: a program in a module of its own imports conduit by
// the module path (go.mod points it at this checkout with a replace
// directive, as a user's would at a fork), builds with nothing else, and
// runs as a job.
func TestExternalModule(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/myjob\n\ngo 1.26\n\nrequire github.com/udpconduit/udpconduit v0.0.0\n\nreplace github.com/udpconduit/udpconduit => " + root + "\n"
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(externalMain), 0o644)
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", "myjob", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cmd := exec.Command(filepath.Join(dir, "myjob"), "3")
	cmd.Env = append(os.Environ(), "GASNET_SPAWNFN=L", markerVar(t.Name()))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("myjob 3: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(got)
	want := []string{"rank 0 heard from 2, sum 3", "rank 1 heard from 0, sum 3", "rank 2 heard from 1, sum 3"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("output (-want +got):\n%s", d)
	}
}
