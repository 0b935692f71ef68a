package retransmit

import "time"

// RTT is a smoothed round-trip-time estimate for one peer, in the manner of
// RFC 6298 §2 (SRTT, RTTVAR, RTO = SRTT + 4·RTTVAR). The zero value has no
// sample. Callers feed it only samples from requests that were transmitted
// once (Karn's rule); Tracker.Ack says which samples qualify.
type RTT struct {
	srtt, rttvar time.Duration
	samples      uint32
}

// clockGranularity is the G of RFC 6298: the smallest variance term.
const clockGranularity = 10 * time.Microsecond

// Sample adds one round-trip measurement.
func (r *RTT) Sample(d time.Duration) {
	if d < 0 {
		d = 0
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

// Smoothed returns the smoothed RTT and whether any sample was taken.
func (r *RTT) Smoothed() (time.Duration, bool) { return r.srtt, r.samples > 0 }

// Samples returns how many samples were taken.
func (r *RTT) Samples() int { return int(r.samples) }

// Timeout returns the wait before the first retransmission of a new request:
// Initial when there is no sample yet, else SRTT + max(G, 4·RTTVAR) clamped
// to [MinRTO, Initial].
func (r *RTT) Timeout(c Config) time.Duration {
	if r.samples == 0 {
		return c.Initial
	}
	v := 4 * r.rttvar
	if v < clockGranularity {
		v = clockGranularity
	}
	rto := r.srtt + v
	if rto < c.MinRTO {
		rto = c.MinRTO
	}
	if rto > c.Initial {
		rto = c.Initial
	}
	return rto
}
