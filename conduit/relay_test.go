package conduit

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/spawn"
)

// TestTableChunksAssemble: a table of several chunks, delivered in any
// order, is put back together byte for byte.
func TestTableChunksAssemble(t *testing.T) {
	const n = 6000 // about 3 chunks
	tab := spawn.Table{Addrs: make([]string, n), Hosts: make([]string, n)}
	for r := range n {
		tab.Addrs[r], tab.Hosts[r] = fmt.Sprintf("10.1.%d.%d:%d", r/250, r%250, 30000+r), fmt.Sprintf("h%d", r)
	}
	blob := spawn.EncodeTable(tab)
	chunks := (len(blob) + amudp.MaxMedium - 1) / amudp.MaxMedium
	if chunks < 2 {
		t.Fatalf("table of %d bytes fits one chunk; the test needs several", len(blob))
	}
	var tableIn tableIn
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(chunks) {
		if tableIn.done.Load() {
			t.Fatalf("done before chunk %d", i)
		}
		part := blob[i*amudp.MaxMedium : min((i+1)*amudp.MaxMedium, len(blob))]
		tableIn.chunk(nil, []uint32{uint32(i), uint32(chunks), uint32(len(blob))}, part)
	}
	if !tableIn.done.Load() || tableIn.bad != nil {
		t.Fatalf("done=%v bad=%v after all %d chunks", tableIn.done.Load(), tableIn.bad, chunks)
	}
	blob2, _ := tableIn.take()
	got, err := spawn.DecodeTable(blob2, n)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tab, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestTableChunkMalformed: a chunk past the table's end is an error, not a
// panic or a silent hole.
func TestTableChunkMalformed(t *testing.T) {
	var tableIn tableIn
	tableIn.chunk(nil, []uint32{0, 2, 100}, make([]byte, 100))
	tableIn.chunk(nil, []uint32{1, 2, 100}, make([]byte, 10)) // starts at 65000 > 100
	if !tableIn.done.Load() || tableIn.bad == nil {
		t.Errorf("a chunk past the end was accepted: done=%v bad=%v", tableIn.done.Load(), tableIn.bad)
	}
}
