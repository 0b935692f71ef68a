package retransmit

import (
	"errors"
	"fmt"
	"time"
)

// Time is a monotonic timestamp in nanoseconds from an origin the caller
// chooses. It is a plain integer so that the hot path carries 8 bytes, not a
// 24-byte time.Time (see STYLE.md §6).
type Time int64

// Add returns t+d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns t-u as a duration.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// maxScheduleTerms bounds the reference schedule when Backoff is 1, where the
// "waits no longer than Max" rule alone would never end.
const maxScheduleTerms = 64

// Config holds the retransmission knobs. The names come from GASNet's
// udp-conduit (DESIGN.md §5); the give-up rule is ours:
//
//   - Initial is GASNET_REQUESTTIMEOUT_INITIAL: the wait before the first
//     retransmission when no round-trip estimate exists yet, and the upper bound
//     of the estimate-derived timeout.
//   - Backoff is GASNET_REQUESTTIMEOUT_BACKOFF: while the peer is silent, each
//     further wait is the previous one times Backoff.
//   - Max is GASNET_REQUESTTIMEOUT_MAX: no single wait is longer than Max, and
//     it ends the reference schedule whose sum is the give-up time (see
//     GiveUpAfter). A request is undeliverable only when its peer has sent
//     nothing at all for the give-up time: a peer that answers anything is
//     alive, so loss slows a job but does not end it (QUIC's idle timeout is
//     the model). Max = 0 means never give up; waits are then capped at
//     InfiniteCap.
//   - MinRTO is ours: the floor of the estimate-derived timeout, so that a lost
//     datagram on a 20 µs link is resent after about a millisecond.
//   - Heard is ours: a peer heard from within Heard counts as alive, and the
//     waits of its requests grow by one RTT timeout per attempt instead of
//     multiplying by Backoff (see NextWait). Zero means DefaultHeard.
//   - Probe is ours: no wait is longer than Probe either (zero means
//     DefaultProbe). A peer that is alive but idle (in a barrier, say)
//     sends nothing of its own, so under heavy loss it cannot be told from
//     a dead one, and waits that double up to Max stall such jobs for
//     as long. Probing at least this often costs one datagram per
//     Probe to a peer that is really silent (whose requests are probed one
//     at a time), and leaves the give-up time as it is.
type Config struct {
	Initial time.Duration
	Backoff uint32
	Max     time.Duration
	MinRTO  time.Duration
	Heard   time.Duration
	Probe   time.Duration
}

// DefaultHeard is the default of Config.Heard.
const DefaultHeard = time.Second

// DefaultProbe is the default of Config.Probe.
const DefaultProbe = 250 * time.Millisecond

func (c Config) heard() time.Duration {
	if c.Heard <= 0 {
		return DefaultHeard
	}
	return c.Heard
}

// NextWait returns the wait after a retransmission at now of a request last
// transmitted at last whose previous wait was wait; rto is the peer's
// current RTT timeout and heard when the peer was last heard from (0:
// never). It is the whole backoff policy:
//
//   - the peer sent something since last: the loss was random and the peer is
//     alive, so the wait goes back to rto;
//   - the peer was heard from within Heard: the wait grows by rto, linearly,
//     so that at heavy random loss (30% each way leaves a round trip one
//     chance in two) a request's expected delay stays a few RTTs, where
//     doubling would make it unbounded;
//   - else the peer is silent: the wait is multiplied by Backoff, as in the
//     reference.
//
// Every wait is at most Max (InfiniteCap when Max is 0) and at most Probe.
func (c Config) NextWait(wait, rto time.Duration, last, heard, now Time) time.Duration {
	var next time.Duration
	switch {
	case heard > last:
		next = rto
	case heard > 0 && now.Sub(heard) < c.heard():
		next = wait + rto
	default:
		next = wait * time.Duration(c.Backoff)
		if next < wait { // overflowed
			next = c.waitCap()
		}
	}
	return min(max(next, 1), c.waitCap())
}

// InfiniteCap caps each wait when Config.Max is 0 (never give up), were
// Probe longer. It is the reference default of GASNET_REQUESTTIMEOUT_MAX.
const InfiniteCap = 30 * time.Second

// DefaultConfig returns the reference defaults: 100 ms, ×2, 30 s, and a 1 ms
// floor for estimate-derived timeouts.
func DefaultConfig() Config {
	return Config{Initial: 100 * time.Millisecond, Backoff: 2, Max: 30 * time.Second, MinRTO: time.Millisecond}
}

// ErrConfig is wrapped by every validation error of Config.
var ErrConfig = errors.New("retransmit: invalid config")

// Validate reports whether c is usable.
func (c Config) Validate() error {
	switch {
	case c.Initial <= 0:
		return fmt.Errorf("%w: initial timeout %v must be > 0", ErrConfig, c.Initial)
	case c.Backoff < 1:
		return fmt.Errorf("%w: backoff %d must be >= 1", ErrConfig, c.Backoff)
	case c.Max < 0:
		return fmt.Errorf("%w: max timeout %v must be >= 0 (0 = never give up)", ErrConfig, c.Max)
	case c.MinRTO < 0:
		return fmt.Errorf("%w: minimum timeout %v must be >= 0", ErrConfig, c.MinRTO)
	}
	return nil
}

// waitCap is the longest single wait: Max (InfiniteCap when 0), at most
// Probe.
func (c Config) waitCap() time.Duration {
	probe := c.Probe
	if probe <= 0 {
		probe = DefaultProbe
	}
	if c.Max == 0 {
		return min(InfiniteCap, probe)
	}
	return min(c.Max, probe)
}

// GiveUpAfter is how long a peer must stay silent (from a request's first
// transmission, or from the last datagram the peer sent if that is later)
// before the request is declared undeliverable, or 0 when Max is 0 (never).
// It follows the reference
// schedule: the waits Initial, Initial·Backoff, Initial·Backoff², … for as long
// as they do not exceed Max, then one last wait of Max. With the defaults that
// is 9 retransmissions and 0.1+0.2+…+25.6+30 = 81.1 s, the AMUDP figure.
// The actual waits may be much shorter (they start from the RTT estimate), but
// the give-up time stays this one, so a fast link does not make requests
// undeliverable sooner than the configuration says; and it is counted from
// the peer's last sign of life, so heavy loss never makes them undeliverable
// while the peer still answers.
func (c Config) GiveUpAfter() time.Duration {
	if c.Max == 0 {
		return 0
	}
	var total time.Duration
	w := c.Initial
	for i := 0; i < maxScheduleTerms && w <= c.Max; i++ {
		total += w
		w *= time.Duration(c.Backoff)
	}
	return total + c.Max
}

// Retries is the number of retransmissions of the reference schedule before
// giving up (9 with the defaults), or -1 when Max is 0.
func (c Config) Retries() int {
	if c.Max == 0 {
		return -1
	}
	n := 0
	for w := c.Initial; n < maxScheduleTerms && w <= c.Max; w *= time.Duration(c.Backoff) {
		n++
	}
	return n
}
