package conduit

import (
	"sync"
	"testing"
	"time"
)

// runLocalWithin is RunLocal bounded by d: a job that does not end is a
// test failure, not a hang.
func runLocalWithin(t *testing.T, d time.Duration, n int, program func(j *Job)) int {
	t.Helper()
	done := make(chan int, 1)
	go func() {
		code, err := RunLocal(n, program)
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()
	select {
	case code := <-done:
		return code
	case <-time.After(d):
		t.Fatalf("the job did not end within %v", d)
		return -1
	}
}

// TestFinalizeLocal: RunLocal's console keeps Finalize's rules: the
// highest code once every rank has called it, a rank's second call counted
// once, a return beside ranks in Finalize ends the job with 1 (never a
// hang), an Exit(0) after a Finalize(3) keeps the 3, and Finalize from a
// handler aborts the job.
func TestFinalizeLocal(t *testing.T) {
	bound := 30 * time.Second
	if code := runLocalWithin(t, bound, 3, func(j *Job) { j.Finalize(j.Rank()) }); code != 2 {
		t.Errorf("Finalize(rank) on 3 ranks: code %d, want 2", code)
	}

	var late sync.WaitGroup
	late.Add(1)
	code := runLocalWithin(t, bound, 3, func(j *Job) {
		switch j.Rank() {
		case 0:
			go j.Finalize(0)
			j.Finalize(0)
		case 1:
			j.Finalize(0)
		case 2:
			time.Sleep(200 * time.Millisecond) // the others are in Finalize
			late.Done()
			j.Finalize(5)
		}
	})
	late.Wait()
	if code != 5 {
		t.Errorf("a rank calling Finalize twice counted twice: code %d, want 5 (the last rank's)", code)
	}

	code = runLocalWithin(t, bound, 2, func(j *Job) {
		if j.Rank() == 0 {
			j.Finalize(0)
		}
	})
	if code != 1 {
		t.Errorf("rank 1 returned while rank 0 was in Finalize: code %d, want 1", code)
	}
	code = runLocalWithin(t, bound, 2, func(j *Job) {
		if j.Rank() == 0 {
			time.Sleep(100 * time.Millisecond) // rank 1 has returned
			j.Finalize(0)
		}
	})
	if code != 1 {
		t.Errorf("rank 0 called Finalize after rank 1 returned: code %d, want 1", code)
	}

	code = runLocalWithin(t, bound, 3, func(j *Job) {
		if j.Rank() != 0 {
			j.World().Barrier() // never completes: rank 0 returned
		}
	})
	if code != 1 {
		t.Errorf("rank 0 returned while the others waited in a barrier: code %d, want 1 (it hung before)", code)
	}

	code = runLocalWithin(t, bound, 2, func(j *Job) {
		if j.Rank() == 0 {
			j.Finalize(3)
		}
		time.Sleep(100 * time.Millisecond)
		j.Exit(0)
	})
	if code != 3 {
		t.Errorf("Exit(0) after Finalize(3): code %d, want 3", code)
	}
	code = runLocalWithin(t, bound, 2, func(j *Job) {
		if _, err := j.Attach([]HandlerEntry{{Index: 130, Fn: func(*Token, []uint32, []byte) { j.Finalize(4) }}}, 0); err != nil {
			t.Error(err)
		}
		if j.Rank() == 0 {
			j.RequestShort(1, 130)
		}
		j.Finalize(0)
	})
	if code != 1 {
		t.Errorf("Finalize from a handler: code %d, want 1 (an abort)", code)
	}
}

// TestLibraryHandlersShrugMisfits: the library's own handlers given
// messages that do not fit them (no arguments, huge ones, a payload where
// none belongs) leave the receiving rank working: a barrier after them
// completes and the job ends with 0.
func TestLibraryHandlersShrugMisfits(t *testing.T) {
	code := runLocalWithin(t, 30*time.Second, 2, func(j *Job) {
		if _, err := j.Attach(nil, 1024); err != nil {
			t.Error(err)
		}
		peer := 1 - j.Rank()
		for _, h := range []int{hTable, hPut, hGetReq, hGetReply, hDone} {
			j.ep.RequestShort(peer, h)
			j.ep.RequestShort(peer, h, 1<<31, 1<<31, 1<<31, 1<<31, 1<<31, 1<<31)
			j.ep.RequestMedium(peer, h, make([]byte, 300), 9, 9, 9)
		}
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: barrier after the misfits: %v", j.Rank(), err)
		}
		j.Finalize(0)
	})
	if code != 0 {
		t.Errorf("code %d, want 0", code)
	}
}
