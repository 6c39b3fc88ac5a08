// Package benchkit is what the TestXxxBench measurements of the main
// module share: the SEARCHD_BENCH switch and its sizing variables, a pool
// on the durable cluster, concurrent clients calling back to back, medians
// and percentiles, and the load average they print beside their figures.
// It asserts nothing about time.
package benchkit

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Asked skips t unless SEARCHD_BENCH is set: a benchmark runs only when
// asked.
func Asked(t testing.TB) {
	t.Helper()
	if os.Getenv("SEARCHD_BENCH") == "" {
		t.Skip("a benchmark: set SEARCHD_BENCH=1 to run it")
	}
}

// Int returns the positive integer in the environment variable name, or
// def when it is unset, not a number or not positive.
func Int(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Float is [Int] for a positive number that may have a fraction.
func Float(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v > 0 {
		return v
	}
	return def
}

// Pool is the shape of a benchmark's pool: MaxConns connections (pgx's
// default when 0; all opened up front when Eager), each with Tracer when
// it is not nil.
type Pool struct {
	MaxConns int
	Eager    bool
	Tracer   pgx.QueryTracer
}

// Open opens p on url (a pgtest.NewDurableDBURL) and closes it at t's
// cleanup; any error fails t.
func (p Pool) Open(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxConns > 0 {
		cfg.MaxConns = int32(p.MaxConns)
	}
	if p.Eager {
		cfg.MinConns = cfg.MaxConns
	}
	if p.Tracer != nil {
		cfg.ConnConfig.Tracer = p.Tracer
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Clients runs call(c, i) from clients goroutines, each calling back to
// back until d has passed or stop closes (a nil stop never does); c is the
// client, from 0, and i its call's number, from 0. Unless stop is closed,
// every client makes at least one call, however late it starts. A client
// ends at its first error. Clients returns the latency of every call that succeeded
// (in no order), the time from the start to the last client's end, and
// the first error.
func Clients(clients int, d time.Duration, stop <-chan struct{}, call func(c, i int) error) (lat []time.Duration, elapsed time.Duration, err error) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 1024)
			var failed error
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, mine...)
				if err == nil {
					err = failed
				}
			}()
			for i := 0; i == 0 || time.Now().Before(deadline); i++ {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				if failed = call(c, i); failed != nil {
					return
				}
				mine = append(mine, time.Since(t0))
			}
		})
	}
	wg.Wait()
	return lat, time.Since(start), err
}

// Median returns the median of xs (the mean of the middle two when their
// number is even); xs is left unsorted.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// Percentile returns the p-th percentile of xs by nearest rank, rounded to
// the microsecond; 0 for none.
func Percentile(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (len(s)*p+99)/100 - 1
	return s[max(i, 0)].Round(time.Microsecond)
}

// LoadAverage returns the machine's 1, 5 and 15 minute load averages, or
// "unknown".
func LoadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
