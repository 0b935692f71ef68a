package testbound

import (
	"testing"
	"testing/synctest"
	"time"
)

type fixedDeadline time.Time

func (d fixedDeadline) Deadline() (time.Time, bool) { return time.Time(d), !time.Time(d).IsZero() }

func TestFactor(t *testing.T) {
	t.Setenv("UDPCONDUIT_TEST_SLOWDOWN", "")
	f := Factor()
	if f < 1 || Race && f < RaceFactor || f > RaceFactor*maxLoadFactor {
		t.Errorf("Factor() = %v (race %v)", f, Race)
	}
	t.Setenv("UDPCONDUIT_TEST_SLOWDOWN", "3")
	if g := Factor(); g < 3*f*0.5 {
		t.Errorf("with UDPCONDUIT_TEST_SLOWDOWN=3, Factor() = %v, was %v", g, f)
	}
	for _, v := range []string{"0.5", "-2", "x", "+Inf", "NaN"} {
		t.Setenv("UDPCONDUIT_TEST_SLOWDOWN", v)
		if g := Factor(); g > 2*f || g < 1 {
			t.Errorf("UDPCONDUIT_TEST_SLOWDOWN=%s: Factor() = %v", v, g)
		}
	}
}

func TestBounds(t *testing.T) {
	if s := Scale(time.Second); s < time.Second {
		t.Errorf("Scale(1s) = %v, less than 1s", s)
	}
	if w, s := Work(time.Second, 16), Scale(16*time.Second); w < 16*time.Second || w > 2*s {
		t.Errorf("Work(1s, 16) = %v, Scale(16s) = %v", w, s)
	}
	if b := For(fixedDeadline{}, time.Second); b < time.Second {
		t.Errorf("For without a deadline = %v", b)
	}
	if b := For(struct{}{}, time.Second); b < time.Second {
		t.Errorf("For of a test without Deadline = %v", b)
	}
	t.Setenv("UDPCONDUIT_TEST_SLOWDOWN", "100")
	if b := For(fixedDeadline(time.Now().Add(10*time.Second)), 2*time.Second); b > 9*time.Second || b < 8*time.Second {
		t.Errorf("For(2s) slowed down 100 times with 10 s left = %v, want 9 s", b)
	}
	if b := For(fixedDeadline(time.Now().Add(time.Second)), 5*time.Second); b != 5*time.Second {
		t.Errorf("For(5s) with 1 s left = %v, want 5s (never less than the work)", b)
	}
}

// TestForInBubble: in a synctest bubble, where testing.T.Deadline panics,
// For is Scale.
func TestForInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if b := For(t, time.Second); b < time.Second {
			t.Errorf("For in a bubble = %v", b)
		}
	})
}
