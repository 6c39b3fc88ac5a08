package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// slowThreshold is where a request counts as slow: two orders of magnitude
// above a replay's median, and below the 131–180 ms p99 of issue 35's
// bimodal replay rounds. Every slow request is kept with its phases (see
// slowRequest), and each round prints how many it had.
const slowThreshold = 50 * time.Millisecond

// histBounds are the upper bounds of the latency histogram's buckets,
// doubling from 125 µs to 1.024 s; a last bucket holds what is slower. Log
// scale, so that a tail of a few requests at 150 ms shows beside the
// thousands at half a millisecond.
var histBounds = func() []time.Duration {
	var b []time.Duration
	for d := 125 * time.Microsecond; d <= 1024*time.Millisecond; d *= 2 {
		b = append(b, d)
	}
	return b
}()

// histogram counts latencies into the buckets of histBounds (the last
// count is what is slower than the last bound).
func histogram(latencies []time.Duration) []int {
	counts := make([]int, len(histBounds)+1)
	for _, l := range latencies {
		i, _ := slices.BinarySearch(histBounds, l)
		counts[i]++
	}
	return counts
}

// pooled returns the latencies of every round, unsorted.
func pooled(rs []round) []time.Duration {
	var all []time.Duration
	for _, r := range rs {
		all = append(all, r.latencies...)
	}
	return all
}

// maxLatency is the slowest request of a round, zero when it had none.
func (r round) maxLatency() time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[len(r.latencies)-1]
}

// printHistograms prints measure m's latency histogram, every round of
// each handler pooled: one line per bucket from the first that holds a
// request to the last, the counts, a bar whose length is the count's log10
// (so a bucket of 1 shows, and one of 10,000 is four times its length
// plus one), and the slowest request.
func printHistograms(out io.Writer, m measure, f *figures) {
	sides := []struct {
		name   string
		counts []int
		max    time.Duration
	}{{name: "real"}, {name: "thin"}}
	first, last := len(histBounds), 0
	for i, rs := range [][]round{f.real, f.thin} {
		sides[i].counts = histogram(pooled(rs))
		for _, r := range rs {
			sides[i].max = max(sides[i].max, r.maxLatency())
		}
		for b, n := range sides[i].counts {
			if n > 0 {
				first, last = min(first, b), max(last, b)
			}
		}
	}
	if first > last {
		return
	}
	fmt.Fprintf(out, "%s: latency histogram of all rounds (requests per bucket, bar = log10 of the count)\n", m)
	bar := func(n int) string {
		if n == 0 {
			return ""
		}
		return strings.Repeat("#", 1+int(3*math.Log10(float64(n))))
	}
	for b := first; b <= last; b++ {
		label := "> " + msShort(histBounds[len(histBounds)-1])
		if b < len(histBounds) {
			label = "≤ " + msShort(histBounds[b])
		}
		fmt.Fprintf(out, "  %-10s real %7d %-16s thin %7d %s\n", label,
			sides[0].counts[b], bar(sides[0].counts[b]), sides[1].counts[b], bar(sides[1].counts[b]))
	}
	fmt.Fprintf(out, "  %-10s real %7s %-16s thin %7s\n", "max", msShort(sides[0].max), "", msShort(sides[1].max))
}

// msShort formats d in milliseconds with the digits that matter.
func msShort(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	case v >= 1:
		return fmt.Sprintf("%.2fms", v)
	}
	return fmt.Sprintf("%.3fms", v)
}
