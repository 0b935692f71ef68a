package amudp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
)

// Offsets of the ring's header words (shmring's layout).
const (
	ringMagic = 0
	ringTail  = 64
	ringHead  = 128
)

// fatalCounter is a fatal handler that keeps what it was given.
type fatalCounter struct {
	calls atomic.Int32
	err   atomic.Pointer[error]
}

func (f *fatalCounter) handle(err error) {
	f.calls.Add(1)
	f.err.Store(&err)
}

// pollUntilErr polls e until a poll fails, for at most 10 s.
func pollUntilErr(t *testing.T, e *Endpoint) error {
	t.Helper()
	return within(t, func() error {
		for {
			if err := e.Poll(); err != nil {
				return err
			}
		}
	})
}

// within returns what f returns, failing the test if that takes more than
// 10 s (f then goes on, until the test's endpoints close).
func within(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no error within 10 s")
		return nil
	}
}

// checkInboxError checks that err is an *InboxError matching
// ErrInboxCorrupt, for rank's inbox, found by rank by, whose text names
// both, and that the fatal handler saw the same, once.
func checkInboxError(t *testing.T, err error, f *fatalCounter, rank, by int) {
	t.Helper()
	var ie *InboxError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInboxCorrupt) || ie.Rank != rank || ie.By != by {
		t.Fatalf("error %v (%T), want an InboxError of rank %d found by rank %d", err, err, rank, by)
	}
	if want := fmt.Sprintf("rank %d: corrupted shared-memory inbox (found by rank %d: ", rank, by); !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error text %q, want it to begin %q", err, want)
	}
	if f.calls.Load() != 1 || (*f.err.Load()).Error() != err.Error() {
		t.Errorf("fatal handler called %d times, last with %v", f.calls.Load(), f.err.Load())
	}
}

// TestSharedCorruptHeaderFoundByOwner: a header word of a rank's inbox
// overwritten (its magic word, as 0xff over the header does) ends its
// polls with an InboxError naming it, found by itself, whether it spins
// or is about to sleep in Wait; the fatal handler runs once, and every
// later poll fails as well.
func TestSharedCorruptHeaderFoundByOwner(t *testing.T) {
	for _, wait := range []bool{false, true} {
		eps := sharedJob(t, 2, DefaultInbox)
		var f fatalCounter
		eps[1].SetFatalHandler(f.handle)
		sh := eps[1].tr.(*Shared)
		binary.LittleEndian.PutUint64(sh.inbox.reg.Bytes()[ringMagic:], 0xffffffffffffffff)
		if wait {
			// A blocking wait looks at the header before it sleeps,
			// and returns at once.
			start := time.Now()
			if err := sh.Wait(time.Minute); err != nil || time.Since(start) > 10*time.Second {
				t.Fatalf("Wait on a corrupted inbox: %v after %v", err, time.Since(start))
			}
		}
		err := pollUntilErr(t, eps[1])
		checkInboxError(t, err, &f, 1, 1)
		if err := eps[1].Poll(); !errors.Is(err, ErrInboxCorrupt) {
			t.Errorf("the poll after: %v", err)
		}
		if f.calls.Load() != 1 {
			t.Errorf("fatal handler called %d times", f.calls.Load())
		}
	}
}

// TestSharedCorruptTailFoundBySender: a rank whose peer's inbox has a
// tail of all ones (0xff over the header) finds it on its next direct
// request and on a datagram into it: the request fails with an
// InboxError naming the peer, found by the sender, instead of slicing
// past the ring (the panic) or waiting for room forever; the
// fatal handler runs once.
func TestSharedCorruptTailFoundBySender(t *testing.T) {
	for _, spoil := range []struct {
		name     string
		off      int
		v        uint64
		direct   bool
		wantWhat string
	}{
		{"tail all ones, direct", ringTail, 0xffffffffffffffff, true, "the tail is 0xffffffffffffffff, not a multiple of 64"},
		{"tail all ones, datagram", ringTail, 0xffffffffffffffff, false, "the tail is 0xffffffffffffffff"},
		{"head far beyond the tail, direct", ringHead, 1 << 40, true, "the head is 0x10000000000"},
	} {
		t.Run(spoil.name, func(t *testing.T) {
			eps := sharedJob(t, 2, shmring.MinCapacity*4)
			var f fatalCounter
			eps[0].SetFatalHandler(f.handle)
			eps[1].Register(10, func(*Token, []uint32, []byte) {})
			if err := eps[0].RequestShort(1, 10); err != nil { // maps rank 1's inbox
				t.Fatal(err)
			}
			victim := eps[1].tr.(*Shared).inbox.reg.Bytes()
			binary.LittleEndian.PutUint64(victim[spoil.off:], spoil.v)
			var err error
			switch {
			case spoil.direct:
				// Rank 1 never polls: the requests fill its inbox,
				// and a full one makes the sender read its head.
				err = within(t, func() (err error) {
					for i := 0; err == nil && i < 10000; i++ {
						err = eps[0].RequestMedium(1, 10, make([]byte, 1000))
					}
					return err
				})
			default:
				sh := eps[0].tr.(*Shared)
				sh.Send(make([]byte, 64), eps[1].LocalAddr())
				err = pollUntilErr(t, eps[0])
			}
			checkInboxError(t, err, &f, 1, 0)
			if !strings.Contains(err.Error(), spoil.wantWhat) {
				t.Errorf("error %q does not say %q", err, spoil.wantWhat)
			}
		})
	}
}
