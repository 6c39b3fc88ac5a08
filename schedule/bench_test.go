package schedule

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

// TestDrainBench measures the drain of scheduled starts on a durable
// PostgreSQL (fsync and synchronous_commit on, printed first), at
// searchd's defaults unless it says otherwise:
//
//   - occurrences started per second: one drain at the default batch (10)
//     ticking back to back (no wait between ticks) through a backlog of
//     due schedules until it is gone; then the batch at 100, and four
//     drains at 10 at once (four replicas);
//   - what the drain costs the start path: 16 clients start saved searches
//     with new keys (admission.Starter, the start path of the API) in
//     rounds of three phases on one pool: no drain; the drain at its
//     defaults (a tick a second taking a full batch of 10, the backlog
//     never empty); the drain ticking back to back, every tick full. It
//     prints p50 and p99 of each and the p99 ratios against no drain,
//     round by round (median, range).
//
// A measurement, not a timed assertion, so it runs only when asked:
//
//	SEARCHD_BENCH=1 go test -run TestDrainBench -v ./schedule/
//
// SEARCHD_BENCH_OCCURRENCES (default 2000 per throughput run),
// SEARCHD_BENCH_CLIENTS (16), SEARCHD_BENCH_SECONDS (5 per phase) and
// SEARCHD_BENCH_ROUNDS (5) size it; the smoke form is
// SEARCHD_BENCH_OCCURRENCES=200 SEARCHD_BENCH_SECONDS=1 SEARCHD_BENCH_ROUNDS=1.
func TestDrainBench(t *testing.T) {
	benchkit.Asked(t)
	var (
		occurrences = benchkit.Int("SEARCHD_BENCH_OCCURRENCES", 2000)
		clients     = benchkit.Int("SEARCHD_BENCH_CLIENTS", 16)
		phase       = time.Duration(benchkit.Int("SEARCHD_BENCH_SECONDS", 5)) * time.Second
		rounds      = benchkit.Int("SEARCHD_BENCH_ROUNDS", 5)
		ctx         = context.Background()
		defaults    = DrainConfig{}.WithDefaults()
	)
	pool := benchkit.Pool{MaxConns: clients + 8}.Open(t, pgtest.NewDurableDBURL(t))
	fmt.Printf("\nschedule: database %s\n", pgtest.DurableSettings(t))
	fmt.Printf("schedule: drain defaults: tick %s, batch %d, lease %s; pool of %d connections\n",
		defaults.Interval, defaults.Batch, defaults.Lease, pool.Config().MaxConns)

	rs := runs.NewStore(pool, runs.Config{})
	starter, err := admission.NewStarter(admission.Deps{Pool: pool, Plane: idempotency.NewService(pool, idempotency.Config{}),
		SavedSearches: savedsearch.NewStore(pool), Snapshots: snapshot.NewStore(pool), Runs: rs}, admission.Config{})
	if err != nil {
		t.Fatal(err)
	}
	newDrain := func(batch int) *Drain {
		d, err := NewDrain(DrainDeps{Pool: pool, Start: starter.StartSavedSearch, Runs: rs}, DrainConfig{Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// Throughput.
	fmt.Printf("\n%-44s %8s %10s %12s\n", "occurrences started per second", "started", "time", "per second")
	for _, run := range []struct {
		name          string
		batch, drains int
	}{
		{"1 drain, batch 10 (the default)", 10, 1},
		{"1 drain, batch 100 (changed: a larger batch)", 100, 1},
		{"4 drains, batch 10 (four replicas)", 10, 4},
	} {
		org := uuid.New()
		seedDue(t, pool, org, occurrences)
		var started atomic.Int64
		begin := time.Now()
		var wg sync.WaitGroup
		for range run.drains {
			d := newDrain(run.batch)
			wg.Go(func() {
				for {
					rep, err := d.Tick(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					started.Add(int64(rep.Started))
					if rep.Taken == 0 && rep.Planned == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(begin)
		fmt.Printf("%-44s %8d %10s %12.0f\n", run.name, started.Load(), took.Round(time.Millisecond),
			float64(started.Load())/took.Seconds())
		if int(started.Load()) != occurrences {
			t.Errorf("%s started %d of %d", run.name, started.Load(), occurrences)
		}
	}

	// The start path with and without the drain. The backlog holds enough
	// for every tick to take a full batch in every phase.
	backlog := 10*int(phase.Seconds())*rounds + 200*int(phase.Seconds())*rounds
	seedDue(t, pool, uuid.New(), backlog)
	fmt.Printf("\nschedule: a backlog of %d due occurrences; %d clients start new saved-search keys; phases of %s, %d rounds\n",
		backlog, clients, phase, rounds)
	startOrg := uuid.New()
	ss, err := savedsearch.NewStore(pool).Create(ctx, startOrg, savedsearch.CreateParams{Name: "bench", Brief: savedsearch.Brief{Query: "bench"}})
	if err != nil {
		t.Fatal(err)
	}
	startFor := func(d time.Duration) []time.Duration {
		lat, _, err := benchkit.Clients(clients, d, nil, func(int, int) error {
			_, err := starter.StartSavedSearch(ctx, admission.SavedSearchStart{Org: startOrg, SavedSearchID: ss.ID,
				IdempotencyKey: uuid.NewString()})
			return err
		})
		if err != nil {
			t.Error(err)
		}
		return lat
	}
	// drainFor runs a drain for d, ticking every Interval (the default)
	// or back to back, and returns the function that waits for it and
	// prints what it started.
	drainFor := func(d time.Duration, backToBack bool) func() {
		dctx, cancel := context.WithTimeout(ctx, d)
		var started atomic.Int64
		done := make(chan struct{})
		dr := newDrain(0)
		go func() {
			defer close(done)
			for dctx.Err() == nil {
				rep, err := dr.Tick(dctx)
				if err != nil && dctx.Err() == nil {
					t.Error(err)
					return
				}
				started.Add(int64(rep.Started))
				if !backToBack {
					select {
					case <-dctx.Done():
					case <-time.After(defaults.Interval):
					}
				}
			}
		}()
		return func() {
			<-done
			cancel()
			left := 0
			_ = pool.QueryRow(ctx, `SELECT count(*) FROM agent.schedule_occurrences WHERE closed_at IS NULL`).Scan(&left)
			fmt.Printf("  the drain (back to back: %v) started %d; %d occurrences left open\n", backToBack, started.Load(), left)
		}
	}
	startFor(time.Second) // warm the pool and the plan caches
	var base, dflt, full []time.Duration
	var rDefault, rFull []float64
	for r := range rounds {
		b := startFor(phase)
		wait := drainFor(phase, false)
		d := startFor(phase)
		wait()
		wait = drainFor(phase, true)
		f := startFor(phase)
		wait()
		base, dflt, full = append(base, b...), append(dflt, d...), append(full, f...)
		rDefault = append(rDefault, ratio(d, b))
		rFull = append(rFull, ratio(f, b))
		fmt.Printf("round %d: p99 no drain %s, drain at its defaults %s (%.2fx), back-to-back full ticks %s (%.2fx)\n",
			r+1, benchkit.Percentile(b, 99), benchkit.Percentile(d, 99), rDefault[r], benchkit.Percentile(f, 99), rFull[r])
	}
	fmt.Printf("\n%-40s %8s %10s %10s %16s\n", "start latency", "starts", "p50", "p99", "p99 ratio")
	fmt.Printf("%-40s %8d %10s %10s %16s\n", "no drain", len(base), benchkit.Percentile(base, 50), benchkit.Percentile(base, 99), "1.00x")
	for _, row := range []struct {
		name   string
		lat    []time.Duration
		ratios []float64
	}{
		{"drain at its defaults (1 s, batch 10)", dflt, rDefault},
		{"drain, back-to-back full ticks", full, rFull},
	} {
		slices.Sort(row.ratios)
		fmt.Printf("%-40s %8d %10s %10s %7.2fx median (%.2f-%.2f)\n", row.name, len(row.lat), benchkit.Percentile(row.lat, 50),
			benchkit.Percentile(row.lat, 99), row.ratios[len(row.ratios)/2], row.ratios[0], row.ratios[len(row.ratios)-1])
	}
}

// seedDue writes n saved searches of org with an hourly schedule whose
// first occurrence came due a minute ago, in one statement.
func seedDue(t *testing.T, pool *pgxpool.Pool, org uuid.UUID, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
WITH s AS (
	INSERT INTO agent.saved_searches (id, organization_id, name, brief, created_at, updated_at)
	SELECT gen_random_uuid(), $1, 'bench ' || i, '{"query":"bench"}', now(), now() FROM generate_series(1, $2::int) i
	RETURNING id, organization_id
), b AS (
	INSERT INTO agent.saved_search_baselines (saved_search_id, organization_id, items, updated_at)
	SELECT id, organization_id, '{}', now() FROM s
)
INSERT INTO agent.saved_search_schedules (organization_id, saved_search_id, interval_seconds, time_zone, start_at,
	catch_up_seconds, next_due_at, created_at, updated_at)
SELECT organization_id, id, 3600, 'UTC', date_trunc('second', now()) - interval '1 minute', 86400,
	date_trunc('second', now()) - interval '1 minute', now(), now()
FROM s`, org, n)
	if err != nil {
		t.Fatal(err)
	}
}

func ratio(a, b []time.Duration) float64 {
	return float64(benchkit.Percentile(a, 99)) / float64(max(benchkit.Percentile(b, 99), time.Microsecond))
}
