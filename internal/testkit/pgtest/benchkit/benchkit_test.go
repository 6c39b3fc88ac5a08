package benchkit

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMedianAndPercentile(t *testing.T) {
	xs := []float64{9, 1, 5}
	if got := Median(xs); got != 5 {
		t.Errorf("Median(9 1 5) = %v, want 5", got)
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("Median(4 1 3 2) = %v, want 2.5 (the mean of the middle two)", got)
	}
	if xs[0] != 9 {
		t.Errorf("Median sorted its argument: %v", xs)
	}
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond
	}
	for p, want := range map[int]time.Duration{50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond, 0: time.Millisecond} {
		if got := Percentile(ds, p); got != want {
			t.Errorf("Percentile(1..100 ms, %d) = %s, want %s", p, got, want)
		}
	}
	if got := Percentile(nil, 99); got != 0 {
		t.Errorf("Percentile(none) = %s, want 0", got)
	}
}

func TestIntAndFloat(t *testing.T) {
	for v, want := range map[string]int{"": 7, "12": 12, "0": 7, "-3": 7, "x": 7, "1.5": 7} {
		t.Setenv("SEARCHD_BENCH_TEST", v)
		if got := Int("SEARCHD_BENCH_TEST", 7); got != want {
			t.Errorf("Int(%q) = %d, want %d", v, got, want)
		}
	}
	for v, want := range map[string]float64{"": 0.25, "1": 1, "0.5": 0.5, "0": 0.25, "x": 0.25} {
		t.Setenv("SEARCHD_BENCH_TEST", v)
		if got := Float("SEARCHD_BENCH_TEST", 0.25); got != want {
			t.Errorf("Float(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestLoadAverage(t *testing.T) {
	if got := LoadAverage(); got != "unknown" && len(strings.Fields(got)) != 3 {
		t.Errorf("LoadAverage() = %q, want three figures or unknown", got)
	}
}

func TestClients(t *testing.T) {
	// Every client calls back to back with its own numbers until the time
	// is up; every call that succeeded has its latency.
	var mu sync.Mutex
	next := map[int]int{}
	lat, elapsed, err := Clients(3, 50*time.Millisecond, nil, func(c, i int) error {
		mu.Lock()
		defer mu.Unlock()
		if next[c] != i {
			t.Errorf("client %d made call %d, want %d", c, i, next[c])
		}
		next[c]++
		return nil
	})
	calls := 0
	for _, n := range next {
		calls += n
	}
	if err != nil || len(next) != 3 || len(lat) != calls || elapsed < 50*time.Millisecond {
		t.Errorf("Clients(3, 50ms) = %d latencies in %s, %v; want one for each of the %d calls of 3 clients, at least 50ms, no error", len(lat), elapsed, err, calls)
	}

	// A client ends at its first error, the others go on, and the first
	// error is returned with the latencies of the calls that succeeded.
	boom := errors.New("boom")
	var made [2]atomic.Int64
	lat, _, err = Clients(2, 50*time.Millisecond, nil, func(c, i int) error {
		made[c].Add(1)
		if c == 0 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || made[0].Load() != 1 || made[1].Load() < 1 || int64(len(lat)) != made[1].Load() {
		t.Errorf("Clients with a failing client = %d latencies (calls %d, %d), %v; want boom after client 0's first call and a latency for each of client 1's calls", len(lat), made[0].Load(), made[1].Load(), err)
	}

	// A client that starts after the time is up still makes its one call.
	if lat, _, err := Clients(3, 0, nil, func(int, int) error { return nil }); len(lat) != 3 || err != nil {
		t.Errorf("Clients(3, 0) = %d latencies, %v; want one call from each client", len(lat), err)
	}

	// A closed stop ends every client before its time is up.
	stop := make(chan struct{})
	close(stop)
	if lat, elapsed, err := Clients(4, time.Minute, stop, func(int, int) error { return nil }); len(lat) != 0 || err != nil || elapsed > 30*time.Second {
		t.Errorf("Clients with stop closed = %d latencies in %s, %v; want none, at once", len(lat), elapsed, err)
	}
}
