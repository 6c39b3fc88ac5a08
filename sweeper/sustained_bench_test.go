package sweeper

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

// TestSweepSustainedBench runs saved-search starts as fast as the database
// takes them (clients calling back to back, in process) for a long phase
// with the sweeper off, then, on a fresh database of the same cluster, for
// as long with the sweeper's loop of serve on (Sweeper.Run at its
// defaults, on the starts' pool, as one replica runs it), with a short
// retention of the starts' claims: the starts run at a database clock
// moved back by the claims' retention less the short one, so each claim
// falls past its retention (by the database's own now(), which the sweeper
// judges by) that long after it is made. It prints the starts per second
// of both phases and their ratio (target ≥ 0.9×), the rows past retention
// sampled every 10 s of the phase with the sweeper and at its end (target
// at the end: at most one pass's bound, one replica), and the sweeper's
// runs. A measurement, not a timed assertion, so it runs only when asked:
//
//	SEARCHD_BENCH=1 go test -run TestSweepSustainedBench -v -timeout 60m ./sweeper/
//
// SEARCHD_BENCH_SECONDS (default 600, each phase), SEARCHD_BENCH_CLIENTS
// (default 16), SEARCHD_BENCH_RETENTION_SECONDS (default 60, the short
// retention) and SEARCHD_BENCH_SWEEP_INTERVAL (a duration; default the
// sweeper's, 1h) size it.
func TestSweepSustainedBench(t *testing.T) {
	benchkit.Asked(t)
	var (
		phase     = time.Duration(benchkit.Float("SEARCHD_BENCH_SECONDS", 600) * float64(time.Second))
		clients   = benchkit.Int("SEARCHD_BENCH_CLIENTS", 16)
		retention = time.Duration(benchkit.Int("SEARCHD_BENCH_RETENTION_SECONDS", 60)) * time.Second
		interval  time.Duration
		ctx       = context.Background()
	)
	if v := os.Getenv("SEARCHD_BENCH_SWEEP_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SEARCHD_BENCH_SWEEP_INTERVAL=%q: want a positive duration", v)
		}
		interval = d
	}
	// The starts' clock: a claim made now is stamped retention less the
	// short one ago, so it passes its retention the short one from now.
	shift := idempotency.SavedSearchStartRetention - retention
	clock := dbclock.Stub(func() time.Time { return time.Now().Add(-shift) })
	cfg := Config{Interval: interval, Logger: slog.New(slog.DiscardHandler)}.WithDefaults()
	fmt.Printf("\nsweeper: sustained starts, %d clients back to back, phases of %s; claims' retention %s (the database clock of the starts moved back %s)\n",
		clients, phase, retention, shift)
	fmt.Printf("sweeper: database %s\n", pgtest.DurableSettings(t))
	fmt.Printf("sweeper: with the sweeper, Sweeper.Run at bound %d, duty %g, budget %s, interval %s, jitter %s\n",
		cfg.Bound, cfg.Duty, cfg.Budget, cfg.Interval, cfg.Jitter)

	type result struct {
		starts  int
		elapsed time.Duration
		samples []int // rows past retention, every 10 s
		left    int   // rows past retention at the end
		swept   int64
		runs    int64
	}
	run := func(sweep bool) result {
		pool := benchkit.Pool{MaxConns: clients + 2, Eager: true}.Open(t, pgtest.NewDurableDBURL(t))
		org := uuid.New()
		searches := seedSearches(t, pool, org, 100)
		starter, err := admission.NewStarter(admission.Deps{
			Pool: pool, Plane: idempotency.NewService(pool, idempotency.Config{Clock: clock}),
			SavedSearches: savedsearch.NewStore(pool), Snapshots: snapshot.NewStore(pool),
			Runs: runs.NewStore(pool, runs.Config{Clock: clock}),
		}, admission.Config{})
		if err != nil {
			t.Fatal(err)
		}
		var res result
		pctx, stop := context.WithCancel(ctx)
		var (
			wg              sync.WaitGroup
			swept, runCount atomic.Int64
		)
		if sweep {
			c := cfg
			c.Observer = ObserverFunc(func(table string, _, deleted int, _ time.Duration) {
				if table == TableClaims {
					swept.Add(int64(deleted))
				}
			})
			c.Recorder = recorderFunc(func(RunRecord) { runCount.Add(1) })
			s, err := New(pool, c)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { s.Run(pctx) })
		}
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
					res.samples = append(res.samples, pastRetention(t, pool))
				}
			}
		})
		lat, elapsed, err := benchkit.Clients(clients, phase, nil, func(c, i int) error {
			_, err := starter.StartSavedSearch(ctx, admission.SavedSearchStart{
				Org: org, SavedSearchID: searches[rand.N(len(searches))],
				IdempotencyKey: fmt.Sprintf("sustained-%d-%d", c, i), Actor: "bench",
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		res.starts, res.elapsed = len(lat), elapsed
		res.left = pastRetention(t, pool)
		stop()
		wg.Wait()
		res.swept, res.runs = swept.Load(), runCount.Load()
		return res
	}

	off := run(false)
	on := run(true)
	rate := func(r result) float64 { return float64(r.starts) / r.elapsed.Seconds() }
	fmt.Printf("sweeper: load average %s\n", benchkit.LoadAverage())
	fmt.Printf("%-22s %10s %10s %14s %14s %10s %8s\n", "phase", "starts", "starts/s", "past ret. max", "past ret. end", "swept", "runs")
	for _, p := range []struct {
		name string
		r    result
	}{{"sweeper off", off}, {"sweeper on", on}} {
		fmt.Printf("%-22s %10d %10.0f %14d %14d %10d %8d\n", p.name, p.r.starts, rate(p.r), maxOf(p.r.samples), p.r.left, p.r.swept, p.r.runs)
	}
	fmt.Printf("throughput with the sweeper over without: %.2f× (target ≥ 0.9×)\n", rate(on)/rate(off))
	fmt.Printf("rows past retention at the end with the sweeper: %d (target ≤ %d, one pass's bound, one replica)\n", on.left, cfg.Bound)
	fmt.Printf("rows past retention every 10 s with the sweeper: %v\n", on.samples)
}

// pastRetention returns the number of claims past their retention by the
// database's clock.
func pastRetention(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM agent.idempotency_keys WHERE retain_until <= now()`).Scan(&n); err != nil {
		t.Error(err)
	}
	return n
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// seedSearches creates n saved searches of org, with 50 baseline items
// each.
func seedSearches(t *testing.T, pool *pgxpool.Pool, org uuid.UUID, n int) []uuid.UUID {
	t.Helper()
	store := savedsearch.NewStore(pool)
	ids := make([]uuid.UUID, n)
	for i := range ids {
		items := make([]string, 50)
		for j := range items {
			items[j] = fmt.Sprintf("https://example.com/results/%d/%d", i, j)
		}
		ss, err := store.Create(context.Background(), org, savedsearch.CreateParams{
			Name:     fmt.Sprintf("bench saved search %d", i),
			Brief:    savedsearch.Brief{Query: fmt.Sprintf("laptops under 1000 euros, batch %d", i)},
			Baseline: savedsearch.Baseline{Items: items},
			Actor:    "bench",
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = ss.ID
	}
	return ids
}
