package benchkit

import (
	"strings"
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
