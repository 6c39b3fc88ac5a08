package api

import (
	"bytes"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
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

// pressureBusy: the machine's processors are saturated when, over the
// last window, they were busy (neither idle nor waiting on I/O) this share
// of the time or more (/proc/stat, Linux). The machine's, not the
// process's: PostgreSQL on the same machine takes the processors from Go
// without any goroutine waiting longer for one.
const pressureBusy = 0.9

// cpuPressure tells whether the processors are saturated: the machine's,
// by /proc/stat where there is one, or Go's, by the runtime's
// scheduling-latency histogram; either saying so is enough. It reads both
// lazily, at most once a window, from the caller that asks: no goroutine.
// Safe for concurrent use.
type cpuPressure struct {
	mu        sync.Mutex
	at        time.Time
	prev      []uint64
	saturated bool
	sample    []metrics.Sample
	// procStat is the path of the machine's processor counters; busy and
	// total are their last reading.
	procStat    string
	busy, total uint64
}

func newCPUPressure() *cpuPressure {
	return &cpuPressure{sample: []metrics.Sample{{Name: schedLatencies}}, procStat: "/proc/stat"}
}

// Saturated reports whether, over the last window read, the processors
// were saturated; the first call, and a call after a quiet spell, only
// read the counters afresh and answer false.
func (p *cpuPressure) Saturated() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.at) < pressureWindow {
		return p.saturated
	}
	// No window to judge by yet (or one too old to say anything of now):
	// read, and judge the next.
	fresh := now.Sub(p.at) <= 10*pressureWindow
	p.at = now
	machine := p.machineBusy(fresh)
	goSched := p.goSchedWaits(fresh)
	p.saturated = machine || goSched
	return p.saturated
}

// machineBusy reads the machine's processor counters and reports whether,
// since the last reading, they were busy pressureBusy of the time or
// more; without /proc/stat it is false.
func (p *cpuPressure) machineBusy(judge bool) bool {
	b, err := os.ReadFile(p.procStat)
	if err != nil {
		return false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 5 || fields[0] != "cpu" {
		return false
	}
	var busy, total uint64
	for i, f := range fields[1:] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return false
		}
		total += n
		if i != 3 && i != 4 { // idle and iowait
			busy += n
		}
	}
	prevBusy, prevTotal := p.busy, p.total
	p.busy, p.total = busy, total
	if !judge || prevTotal == 0 || total <= prevTotal {
		return false
	}
	return float64(busy-prevBusy) >= pressureBusy*float64(total-prevTotal)
}

// goSchedWaits reads the runtime's scheduling-latency histogram and
// reports whether, since the last reading, a tenth or more of the
// goroutines made runnable waited more than pressureLatency for a
// processor.
func (p *cpuPressure) goSchedWaits(judge bool) bool {
	metrics.Read(p.sample)
	if p.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return false
	}
	h := p.sample[0].Value.Float64Histogram()
	prev := p.prev
	p.prev = append(make([]uint64, 0, len(h.Counts)), h.Counts...)
	if !judge || len(prev) != len(h.Counts) {
		return false
	}
	var total, slow uint64
	for i, n := range h.Counts {
		d := n - prev[i]
		total += d
		// Buckets[i] is the lower bound of Counts[i].
		if h.Buckets[i] >= pressureLatency.Seconds() {
			slow += d
		}
	}
	return total > 0 && slow*10 >= total
}
