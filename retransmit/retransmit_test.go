package retransmit

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const ms = time.Millisecond

func TestGiveUpAfterReference(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		want    time.Duration
		retries int
	}{
		{"defaults", DefaultConfig(), 81100 * ms, 9},
		{"never", Config{Initial: 100 * ms, Backoff: 2, Max: 0}, 0, -1},
		{"initial above max", Config{Initial: 5 * time.Second, Backoff: 2, Max: time.Second}, time.Second, 0},
		{"backoff 1 bounded", Config{Initial: time.Second, Backoff: 1, Max: 100 * time.Second}, 164 * time.Second, 64},
		{"triple", Config{Initial: 10 * ms, Backoff: 3, Max: 100 * ms}, (10 + 30 + 90 + 100) * ms, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.GiveUpAfter(); got != tc.want {
				t.Errorf("GiveUpAfter = %v, want %v", got, tc.want)
			}
			if got := tc.cfg.Retries(); got != tc.retries {
				t.Errorf("Retries = %d, want %d", got, tc.retries)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	bad := []Config{
		{Initial: 0, Backoff: 2},
		{Initial: ms, Backoff: 0},
		{Initial: ms, Backoff: 2, Max: -1},
		{Initial: ms, Backoff: 2, MinRTO: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", c, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

// drive runs one request with no RTT estimate and no reply until it is given
// up, returning the times of every retransmission and of the give-up.
func drive(t *testing.T, cfg Config, start Time, limit int) (resends []time.Duration, gaveUp time.Duration) {
	t.Helper()
	tr := NewTracker(cfg)
	now := start
	h := tr.Add(now, cfg.Initial)
	for i := 0; i < limit; i++ {
		d, ok := tr.NextDeadline()
		if !ok {
			t.Fatalf("no deadline while in flight")
		}
		if d < now {
			t.Fatalf("deadline %d before now %d", d, now)
		}
		// Just before the deadline nothing expires.
		if _, _, ok := expireSilent(tr, d-1); ok {
			t.Fatalf("expired before its deadline")
		}
		now = d
		got, resend, ok := expireSilent(tr, now)
		if !ok || got != h {
			t.Fatalf("Expire(%d) = %d,%v,%v; want handle %d", now, got, resend, ok, h)
		}
		if !resend {
			return resends, now.Sub(start)
		}
		resends = append(resends, now.Sub(start))
	}
	return resends, -1
}

// TestBackoffSequenceAndGiveUp: to a silent peer, the waits double from
// Initial up to Probe (250 ms) and stay there, and the request is given up
// after the reference schedule's 81.1 s (GiveUpAfter); with Probe as long
// as Max, the waits are the reference's own.
func TestBackoffSequenceAndGiveUp(t *testing.T) {
	resends, gaveUp := drive(t, DefaultConfig(), 1000, 400)
	want := []time.Duration{100 * ms, 300 * ms}
	for at := 550 * ms; at < 81100*ms; at += 250 * ms {
		want = append(want, at)
	}
	if d := cmp.Diff(want, resends); d != "" {
		t.Errorf("retransmission times (-want +got):\n%s", d)
	}
	if gaveUp != 81100*ms {
		t.Errorf("gave up after %v, want 81.1s", gaveUp)
	}
	ref := DefaultConfig()
	ref.Probe = ref.Max
	resends, gaveUp = drive(t, ref, 1000, 100)
	want = []time.Duration{100 * ms, 300 * ms, 700 * ms, 1500 * ms, 3100 * ms, 6300 * ms, 12700 * ms, 25500 * ms, 51100 * ms}
	if d := cmp.Diff(want, resends); d != "" || gaveUp != 81100*ms {
		t.Errorf("with Probe = Max: gave up after %v; retransmission times (-want +got):\n%s", gaveUp, d)
	}
}

func TestCapPerAttempt(t *testing.T) {
	cfg := Config{Initial: 100 * ms, Backoff: 4, Max: 1000 * ms, Probe: time.Minute}
	resends, gaveUp := drive(t, cfg, 0, 100)
	// waits 100, 400 (both ≤ max), then 1000 (1600 capped), give up at 1500.
	want := []time.Duration{100 * ms, 500 * ms}
	if d := cmp.Diff(want, resends); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if gaveUp != cfg.GiveUpAfter() || gaveUp != 1500*ms {
		t.Errorf("gave up after %v, want %v", gaveUp, cfg.GiveUpAfter())
	}
}

func TestNeverGiveUp(t *testing.T) {
	cfg := Config{Initial: 100 * ms, Backoff: 2, Max: 0}
	resends, gaveUp := drive(t, cfg, 0, 200)
	if gaveUp != -1 {
		t.Fatalf("gave up after %v with Max=0", gaveUp)
	}
	// Waits grow to Probe and stay there.
	last := resends[len(resends)-1] - resends[len(resends)-2]
	if last != DefaultProbe {
		t.Errorf("last wait %v, want %v", last, DefaultProbe)
	}
}

func TestFastLinkRetransmitsAfterAboutAMillisecond(t *testing.T) {
	cfg := DefaultConfig()
	var rtt RTT
	tr := NewTracker(cfg)
	now := Time(0)
	for i := 0; i < 50; i++ { // 20 µs link
		h := tr.Add(now, rtt.Timeout(cfg))
		now = now.Add(20 * time.Microsecond)
		d, ok := tr.Ack(h, now)
		if !ok {
			t.Fatalf("first-transmission ack not a sample")
		}
		rtt.Sample(d, 0)
	}
	to := rtt.Timeout(cfg)
	if to < cfg.MinRTO || to > 2*ms {
		t.Fatalf("timeout on a 20µs link = %v, want about 1ms", to)
	}
	h := tr.Add(now, to)
	d, _ := tr.NextDeadline()
	if got := d.Sub(now); got != to {
		t.Errorf("deadline in %v, want %v", got, to)
	}
	now = d
	if got, resend, ok := expireSilent(tr, now); !ok || !resend || got != h {
		t.Fatalf("lost datagram not resent at %v", to)
	}
	// Even with a fast first timeout, the give-up time stays the reference one.
	start := now.Add(-to)
	for {
		d, _ := tr.NextDeadline()
		now = d
		_, resend, _ := expireSilent(tr, now)
		if !resend {
			break
		}
	}
	if got := now.Sub(start); got != cfg.GiveUpAfter() {
		t.Errorf("gave up after %v, want %v", got, cfg.GiveUpAfter())
	}
}

func TestKarnsRule(t *testing.T) {
	cfg := DefaultConfig()
	tr := NewTracker(cfg)
	h := tr.Add(0, 10*ms)
	if _, resend, ok := expireSilent(tr, Time(10*ms)); !ok || !resend {
		t.Fatal("no retransmission")
	}
	if tr.Attempts(h) != 2 {
		t.Errorf("attempts = %d, want 2", tr.Attempts(h))
	}
	if d, ok := tr.Ack(h, Time(15*ms)); ok {
		t.Errorf("retransmitted request gave RTT sample %v", d)
	}
	if _, ok := tr.Ack(h, Time(16*ms)); ok {
		t.Error("double ack accepted")
	}
	if tr.Len() != 0 {
		t.Errorf("Len = %d after ack", tr.Len())
	}
}

func TestRTTConvergence(t *testing.T) {
	var r RTT
	if _, ok := r.Smoothed(); ok {
		t.Fatal("zero RTT has a sample")
	}
	cfg := DefaultConfig()
	if r.Timeout(cfg) != cfg.Initial {
		t.Errorf("timeout without sample = %v, want Initial", r.Timeout(cfg))
	}
	for i := 0; i < 100; i++ {
		r.Sample(3*ms, 0)
	}
	s, _ := r.Smoothed()
	if s < 2900*time.Microsecond || s > 3100*time.Microsecond {
		t.Errorf("srtt = %v after constant 3ms samples", s)
	}
	to := r.Timeout(cfg)
	if to < 3*ms || to > 4*ms {
		t.Errorf("timeout = %v, want slightly above 3ms", to)
	}
	// A jump in RTT raises the variance and so the timeout at once.
	r.Sample(20*ms, 0)
	if r.Timeout(cfg) <= to+10*ms {
		t.Errorf("timeout %v did not react to a 20ms sample", r.Timeout(cfg))
	}
	// Never above Initial.
	for i := 0; i < 20; i++ {
		r.Sample(10*time.Second, 0)
	}
	if r.Timeout(cfg) != cfg.Initial {
		t.Errorf("timeout %v above Initial", r.Timeout(cfg))
	}
}

// TestRTTBackoff: a timeout shown to be too short doubles the timer, at
// most once per backed-off timeout, up to Initial; a sample within the
// estimate of a request sent since ends the backoff; a longer one, or one
// of a request sent before, keeps it.
func TestRTTBackoff(t *testing.T) {
	cfg := DefaultConfig()
	var r, plain RTT // plain takes the same samples, never backed off
	now := Time(0).Add(time.Second)
	sample := func(d time.Duration) { r.Sample(d, now); plain.Sample(d, now) }
	r.Backoff(0, cfg) // no sample yet: the timeout is Initial already
	for range 50 {
		sample(2 * ms)
	}
	base := r.Timeout(cfg)
	if base < 2*ms || base > 3*ms {
		t.Fatalf("timeout = %v after constant 2 ms samples", base)
	}
	var got []time.Duration
	for _, step := range []time.Duration{0, 0, base, 2 * base, 4*base - 1, 1, 8 * base} {
		now = now.Add(step)
		r.Backoff(now, cfg)
		got = append(got, r.Timeout(cfg))
	}
	want := []time.Duration{2 * base, 2 * base, 2 * base, 4 * base, 4 * base, 8 * base, 16 * base}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("timeouts after each Backoff (-want +got):\n%s", d)
	}
	sample(10 * ms) // beyond the estimate: the queue is still long
	if to, est := r.Timeout(cfg), plain.Timeout(cfg); to != min(16*est, cfg.Initial) {
		t.Errorf("timeout %v after a long sample; want the backoff kept: 16 x %v, at most Initial", to, est)
	}
	// A quick answer to a request sent before the last backoff: kept.
	r.Sample(2*ms, now.Add(ms))
	plain.Sample(2*ms, now.Add(ms))
	if to, est := r.Timeout(cfg), plain.Timeout(cfg); to != min(16*est, cfg.Initial) {
		t.Errorf("timeout %v after a sample of a request sent before the backoff; want it kept: 16 x %v, at most Initial", to, est)
	}
	now = now.Add(10 * ms)
	sample(2 * ms) // within it, sent since: back to the estimate
	if to, est := r.Timeout(cfg), plain.Timeout(cfg); to != est {
		t.Errorf("timeout %v after a sample within the estimate; want the estimate %v", to, est)
	}
	for range 40 {
		now = now.Add(time.Second)
		r.Backoff(now, cfg)
	}
	if to := r.Timeout(cfg); to != cfg.Initial {
		t.Errorf("timeout %v after many backoffs; want Initial %v", to, cfg.Initial)
	}
}

// TestHeapOrder checks the tracker against a naive model: many requests with
// random timeouts, random acks, and expiry always in deadline order.
func TestHeapOrder(t *testing.T) {
	cfg := Config{Initial: 50 * ms, Backoff: 2, Max: 200 * ms}
	tr := NewTracker(cfg)
	model := map[int]Time{} // handle -> deadline
	seed := uint64(12345)
	rnd := func(n int) int { seed = seed*6364136223846793005 + 1442695040888963407; return int(seed>>33) % n }
	now := Time(0)
	for step := 0; step < 20000; step++ {
		switch op := rnd(3); {
		case op == 0 || len(model) == 0:
			to := time.Duration(1+rnd(50)) * ms
			h := tr.Add(now, to)
			if _, dup := model[h]; dup {
				t.Fatalf("handle %d reused while in flight", h)
			}
			model[h] = now.Add(to)
		case op == 1:
			for h := range model {
				if _, ok := tr.Ack(h, now); tr.Attempts(h) != 0 {
					t.Fatalf("handle %d still in flight after ack (%v)", h, ok)
				}
				delete(model, h)
				break
			}
		default:
			now = now.Add(time.Duration(rnd(5)) * ms)
			for {
				h, resend, ok := expireSilent(tr, now)
				if !ok {
					break
				}
				dl, in := model[h]
				if !in || dl > now {
					t.Fatalf("expired handle %d (in model %v, deadline %d, now %d)", h, in, dl, now)
				}
				for o, odl := range model {
					if odl < dl {
						t.Fatalf("expired %d (deadline %d) before %d (deadline %d)", h, dl, o, odl)
					}
				}
				if resend {
					model[h], _ = tr.NextDeadlineOf(h)
				} else {
					delete(model, h)
				}
			}
		}
		if tr.Len() != len(model) {
			t.Fatalf("Len %d, model %d", tr.Len(), len(model))
		}
	}
}

// expireSilent handles the earliest due request of a peer never heard from.
func expireSilent(tr *Tracker, now Time) (h int, resend, ok bool) {
	h, ok = tr.Due(now)
	if !ok {
		return 0, false, false
	}
	return h, tr.Expire(h, now, 0, 0), true
}

func TestNextWait(t *testing.T) {
	cfg := DefaultConfig() // Heard 1 s, Backoff 2, Max 30 s
	const rto = 2 * ms
	sec := Time(time.Second)
	tests := []struct {
		name             string
		wait             time.Duration
		last, heard, now Time
		want             time.Duration
	}{
		{"answered since the last send: back to rto", 64 * ms, 10 * sec, 10*sec + 1, 10*sec + Time(64*ms), rto},
		{"heard within Heard: grows by rto", 8 * ms, 10 * sec, 10*sec - Time(500*ms), 10*sec + Time(8*ms), 10 * ms},
		{"silent for Heard: doubles", 8 * ms, 10 * sec, 10*sec - Time(time.Second), 10*sec + Time(8*ms), 16 * ms},
		{"never heard: doubles", 100 * ms, 10 * sec, 0, 10*sec + Time(100*ms), 200 * ms},
		{"capped at Probe", 200 * ms, 10 * sec, 0, 30 * sec, DefaultProbe},
		{"linear growth capped at Probe", DefaultProbe, 10 * sec, 10*sec - 1, 10*sec + 1, DefaultProbe},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cfg.NextWait(tc.wait, rto, tc.last, tc.heard, tc.now); got != tc.want {
				t.Errorf("NextWait = %v, want %v", got, tc.want)
			}
		})
	}
	long := cfg
	long.Probe = time.Minute
	if got := long.NextWait(20*time.Second, rto, 10*sec, 0, 30*sec); got != 30*time.Second {
		t.Errorf("with a Probe of a minute, NextWait = %v, want Max (30 s)", got)
	}
}

// TestGiveUpCountsPeerSilence: a request is given up only once its peer
// has been silent for the give-up time. While the peer answers other
// requests, every wait stays near the RTT timeout and the request is never
// given up, however often it is lost; once the peer falls silent, the
// request is given up the give-up time after the peer's last datagram.
func TestGiveUpCountsPeerSilence(t *testing.T) {
	cfg := DefaultConfig()
	const rto = 2 * ms
	tr := NewTracker(cfg)
	h := tr.Add(0, rto)
	var now, heard Time
	maxWait := time.Duration(0)
	// 200 s of a peer that sends something every 300 ms.
	for now < Time(200*time.Second) {
		d, _ := tr.NextDeadline()
		for heard+Time(300*ms) <= d {
			heard += Time(300 * ms)
		}
		if w := d.Sub(now); w > maxWait {
			maxWait = w
		}
		now = d
		if got, ok := tr.Due(now); !ok || got != h {
			t.Fatalf("nothing due at its deadline %d", now)
		}
		if !tr.Expire(h, now, heard, rto) {
			t.Fatalf("given up at %v although the peer was heard at %v", time.Duration(now), time.Duration(heard))
		}
	}
	if maxWait > 300*ms {
		t.Errorf("longest wait %v while the peer is heard from every 300ms; want at most 300ms", maxWait)
	}
	// The peer falls silent: give up GiveUpAfter after its last datagram.
	for {
		d, _ := tr.NextDeadline()
		now = d
		tr.Due(now)
		if !tr.Expire(h, now, heard, rto) {
			break
		}
	}
	if got := now.Sub(heard); got != cfg.GiveUpAfter() {
		t.Errorf("gave up %v after the peer's last datagram, want %v", got, cfg.GiveUpAfter())
	}
}
