package retransmit

import "time"

// RTT is a smoothed round-trip-time estimate for one peer, in the manner of
// RFC 6298 §2 (SRTT, RTTVAR, RTO = SRTT + 4·RTTVAR). The zero value has no
// sample. Callers feed it only samples from requests that were transmitted
// once (Karn's rule); Tracker.Ack says which samples qualify. A timeout
// shown to be too short backs the timer off (Backoff) until a valid sample
// within the estimate, as Karn's algorithm does for every timeout.
type RTT struct {
	srtt, rttvar time.Duration
	samples      uint32
	shift        uint8 // the timer is backed off by 2^shift
	backedAt     Time  // when shift last grew
}

// maxShift bounds the backoff at 2^maxShift times the estimate (Initial
// bounds it too).
const maxShift = 10

// clockGranularity is the G of RFC 6298: the smallest variance term.
const clockGranularity = 10 * time.Microsecond

// Sample adds one round-trip measurement, d, of a request sent once at
// now-d. A sample of a request sent since the backoff began (Backoff)
// and within the estimate taken before it ends the backoff; an earlier
// request's says nothing of the timer backed off after it, and a longer
// sample says the peer's queue is still longer than the estimate.
func (r *RTT) Sample(d time.Duration, now Time) {
	if d < 0 {
		d = 0
	}
	if r.shift > 0 && now.Add(-d) >= r.backedAt && d <= r.estimate() {
		r.shift = 0
	}
	if r.samples == 0 {
		r.srtt, r.rttvar = d, d/2
	} else {
		diff := r.srtt - d
		if diff < 0 {
			diff = -diff
		}
		r.rttvar = (3*r.rttvar + diff) / 4
		r.srtt = (7*r.srtt + d) / 8
	}
	if r.samples < ^uint32(0) {
		r.samples++
	}
}

// estimate is SRTT + max(G, 4·RTTVAR), unbounded and without backoff.
func (r *RTT) estimate() time.Duration {
	return r.srtt + max(4*r.rttvar, clockGranularity)
}

// Backoff records, at now, that a timeout was too short: a request was
// sent again although the first copy arrived (a second reply shows it).
// The timer doubles, at most once per backed-off timeout (the copies sent
// in one late round show up together), and stays so until a sample within
// the estimate of a request sent since. A peer slower than the estimate (its queue grew: a slow
// receiver, a loaded host) is then not sent a copy of every request in
// its queue, each copy lengthening it, which makes floods to it take
// far longer (amudp's TestSlowReceiver). Timeouts of lost
// datagrams do not back off: under heavy loss a lone request's waits
// stay near the RTT (Config.NextWait).
func (r *RTT) Backoff(now Time, c Config) {
	if r.samples == 0 || r.shift >= maxShift || (r.shift > 0 && now.Sub(r.backedAt) < r.Timeout(c)) {
		return
	}
	r.shift++
	r.backedAt = now
}

// Smoothed returns the smoothed RTT and whether any sample was taken.
func (r *RTT) Smoothed() (time.Duration, bool) { return r.srtt, r.samples > 0 }

// Samples returns how many samples were taken.
func (r *RTT) Samples() int { return int(r.samples) }

// Timeout returns the wait before the first retransmission of a new request:
// Initial when there is no sample yet, else SRTT + max(G, 4·RTTVAR) at least
// MinRTO, times the backoff, at most Initial.
func (r *RTT) Timeout(c Config) time.Duration {
	if r.samples == 0 {
		return c.Initial
	}
	rto := max(r.estimate(), c.MinRTO)
	if rto > c.Initial>>r.shift {
		return c.Initial
	}
	return rto << r.shift
}
