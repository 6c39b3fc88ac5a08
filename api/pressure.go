package api

import (
	"runtime/metrics"
	"sync"
	"time"
)

// schedLatencies is the runtime's histogram of how long goroutines made
// runnable waited for a processor.
const schedLatencies = "/sched/latencies:seconds"

// Saturation: the processors are saturated when, over the last
// pressureWindow, a tenth or more of the goroutines made runnable waited
// more than pressureLatency for one. Idle, or busy only waiting on the
// database (commits waiting for the WAL flush use no processor), nearly
// every goroutine runs within tens of microseconds; with every processor
// taken, they wait for a time slice (milliseconds).
const (
	pressureWindow  = 100 * time.Millisecond
	pressureLatency = time.Millisecond
)

// cpuPressure tells whether Go's processors are saturated. It reads the
// runtime's scheduling-latency histogram lazily, at most once a window,
// from the caller that asks: no goroutine. Safe for concurrent use.
type cpuPressure struct {
	mu        sync.Mutex
	at        time.Time
	prev      []uint64
	saturated bool
	sample    []metrics.Sample
}

func newCPUPressure() *cpuPressure {
	return &cpuPressure{sample: []metrics.Sample{{Name: schedLatencies}}}
}

// Saturated reports whether, over the last window read, the processors
// were saturated; the first call, and a call after a quiet spell, read
// the histogram afresh. On a runtime without the histogram it is false.
func (p *cpuPressure) Saturated() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.at) < pressureWindow {
		return p.saturated
	}
	metrics.Read(p.sample)
	if p.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return false
	}
	h := p.sample[0].Value.Float64Histogram()
	if p.prev == nil || len(p.prev) != len(h.Counts) || now.Sub(p.at) > 10*pressureWindow {
		// No window to judge by yet (or one too old to say anything of
		// now): judge the next.
		p.prev = append(p.prev[:0], h.Counts...)
		p.at = now
		p.saturated = false
		return false
	}
	var total, slow uint64
	for i, n := range h.Counts {
		d := n - p.prev[i]
		total += d
		// Buckets[i] is the lower bound of Counts[i].
		if h.Buckets[i] >= pressureLatency.Seconds() {
			slow += d
		}
	}
	p.prev = append(p.prev[:0], h.Counts...)
	p.at = now
	p.saturated = total > 0 && slow*10 >= total
	return p.saturated
}
