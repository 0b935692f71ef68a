package shmem

import (
	"os"
	"strconv"
	"testing"
)

// TestRegion: a Region mapped through its path is the same memory; after
// CloseFD nobody maps it, the mappings made before stay.
func TestRegion(t *testing.T) {
	r, err := Create("shmem-test", 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	other, err := Map(r.Path(), 1, 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(other)
	r.Bytes()[4097] = 42
	if other[4097] != 42 || len(other) != 8192 {
		t.Fatalf("the mapping does not share the region's memory (%d bytes)", len(other))
	}
	other[7] = 9
	if r.Bytes()[7] != 9 {
		t.Fatal("a store through the mapping is not in the region")
	}
	if _, err := Map(r.Path(), 1, 4096); err == nil {
		t.Error("a region larger than the maximum was mapped")
	}
	if _, err := Map(r.Path(), 16384, 1<<20); err == nil {
		t.Error("a region smaller than the minimum was mapped")
	}
	r.CloseFD()
	if _, err := Map(r.Path(), 1, 8192); err == nil {
		t.Error("a region was mapped after CloseFD")
	}
	if other[4097] != 42 {
		t.Error("CloseFD changed a mapping")
	}
}

// TestRefused: paths outside /proc, files that are not regions and sizes
// below one byte are refused with an error.
func TestRefused(t *testing.T) {
	if _, err := Create("shmem-test", 0); err == nil {
		t.Error("a region of 0 bytes was created")
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Map(f.Name(), 0, 1<<20); err == nil {
		t.Errorf("%s, outside /proc, was mapped", f.Name())
	}
	if _, err := Map("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), 0, 1<<20); err == nil {
		t.Error("an empty file was mapped")
	}
	if _, err := Map("/proc/self/fd/", 0, 1<<20); err == nil {
		t.Error("a directory was mapped")
	}
}
