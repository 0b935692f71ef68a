// Command pfprobe measures what a page fault costs on this machine: the
// first touch of each page of a fresh anonymous mapping (a fault that
// allocates and zeroes a page), and the first read of each page of a file
// already in the page cache (the kernel maps up to 16 pages per fault). In
// a paravirtualised guest both cost far more than on bare metal, and a Go
// program's start touches a few hundred pages (BENCHMARKS.md, Scale).
//
//	go run ./scripts/pfprobe [FILE]
package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

func main() {
	const pages = 20000
	page := os.Getpagesize()
	anon, err := syscall.Mmap(-1, 0, pages*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pfprobe:", err)
		os.Exit(1)
	}
	start := time.Now()
	for i := 0; i < pages; i++ {
		anon[i*page] = 1
	}
	d := time.Since(start)
	fmt.Printf("anonymous: %d pages in %v, %.2f µs a page\n", pages, d, float64(d.Nanoseconds())/1e3/pages)

	name, err := os.Executable()
	if len(os.Args) > 1 {
		name, err = os.Args[1], nil
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pfprobe:", err)
		os.Exit(1)
	}
	b, err := os.ReadFile(name) // into the page cache
	if err != nil || len(b) < page {
		fmt.Fprintln(os.Stderr, "pfprobe: reading", name, err)
		os.Exit(1)
	}
	f, err := os.Open(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pfprobe:", err)
		os.Exit(1)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, len(b), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pfprobe:", err)
		os.Exit(1)
	}
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start = time.Now()
	sum := 0
	for i := 0; i < len(m); i += page {
		sum += int(m[i])
	}
	d = time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	faults := max(1, after.Minflt-before.Minflt)
	fmt.Printf("file %s: %d pages in %v, %.2f µs a page, %d faults, %.2f µs a fault (checksum %d)\n",
		name, len(m)/page, d, float64(d.Nanoseconds())/1e3/float64(len(m)/page), faults, float64(d.Nanoseconds())/1e3/float64(faults), sum%10)
}
