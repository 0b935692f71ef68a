package conduit

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/amudp"
)

// TestTableChunksAssemble: a table of several chunks, delivered in any
// order, is put back together byte for byte.
func TestTableChunksAssemble(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	blob := make([]byte, 2*amudp.MaxMedium+1234) // 3 chunks, the last short
	for i := range blob {
		blob[i] = byte(rng.Uint32())
	}
	chunks := (len(blob) + amudp.MaxMedium - 1) / amudp.MaxMedium
	if chunks < 2 {
		t.Fatalf("table of %d bytes fits one chunk; the test needs several", len(blob))
	}
	var tableIn tableIn
	for _, i := range rng.Perm(chunks) {
		if tableIn.done.Load() {
			t.Fatalf("done before chunk %d", i)
		}
		part := blob[i*amudp.MaxMedium : min((i+1)*amudp.MaxMedium, len(blob))]
		tableIn.chunk(nil, []uint32{uint32(i), uint32(chunks), uint32(len(blob))}, part)
	}
	if !tableIn.done.Load() || tableIn.bad != nil {
		t.Fatalf("done=%v bad=%v after all %d chunks", tableIn.done.Load(), tableIn.bad, chunks)
	}
	got, _ := tableIn.take()
	if d := cmp.Diff(blob, got); d != "" {
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
