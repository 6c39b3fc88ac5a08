package sweeper

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/pgtest"
	"github.com/searchd/searchd/internal/pgtest/benchkit"
)

// TestSweepBench measures what sweeping costs the claim path: the claim
// latency of concurrent clients claiming new keys, with no sweep running and
// with the sweeper's own run loop (its passes paced by Config.Duty) working
// through a table of expired claims, in alternating phases on the same pool
// and database, until the sweep has deleted every expired row. It prints p50
// and p99 of each, the p99 ratio (target ≤ 1.25×) and the rows the sweep
// deleted per second. A measurement, not a timed assertion, so it runs only
// when asked:
//
//	SEARCHD_BENCH=1 go test -run TestSweepBench -v ./sweeper/
//
// SEARCHD_BENCH_ROWS (default 1000000 expired claims), SEARCHD_BENCH_CLIENTS
// (default 16), SEARCHD_BENCH_SECONDS (default 5 per phase),
// SEARCHD_BENCH_ROUNDS (default at most 40 pairs of phases; fewer when the
// sweep drains the table first), SEARCHD_BENCH_BOUND (default DefaultBound)
// and SEARCHD_BENCH_DUTY (default DefaultDuty; 1 for back-to-back passes)
// size it. A sweep phase ends early when no expired row is left, so it never
// measures a sweep with nothing to do.
func TestSweepBench(t *testing.T) {
	benchkit.Asked(t)
	var (
		rows    = benchkit.Int("SEARCHD_BENCH_ROWS", 1_000_000)
		clients = benchkit.Int("SEARCHD_BENCH_CLIENTS", 16)
		phase   = time.Duration(benchkit.Int("SEARCHD_BENCH_SECONDS", 5)) * time.Second
		rounds  = benchkit.Int("SEARCHD_BENCH_ROUNDS", 40)
		bound   = benchkit.Int("SEARCHD_BENCH_BOUND", DefaultBound)
		duty    = benchkit.Float("SEARCHD_BENCH_DUTY", DefaultDuty)
		ctx     = context.Background()
	)
	// On a durable cluster (fsync and synchronous_commit on): a sweep's
	// deletes and the claims' inserts share its WAL flushes, as in
	// production.
	pool := benchkit.Pool{MaxConns: clients + 2, Eager: true}.Open(t, pgtest.NewDurableDBURL(t))
	fmt.Printf("\nsweeper: database %s\n", pgtest.DurableSettings(t))

	// The expired claims: 30-day tool claims whose retention passed a
	// minute to an hour ago, a millisecond apart, in one statement.
	start := time.Now()
	_, err := pool.Exec(ctx, `
INSERT INTO agent.idempotency_keys
	(id, organization_id, scope, key, request_hash, status, lease_token,
	 resource_type, resource_id, response, claimed_at, lease_expires_at, retain_until)
SELECT gen_random_uuid(), o.org, 'tool.email.send', 'expired-' || i, 'hash', 'completed',
	gen_random_uuid(), 'message', 'm-' || i, '{"ok":true}', c.at - interval '30 days', c.at - interval '30 days',
	c.at - i * interval '1 millisecond'
FROM generate_series(1, $1::int) i,
	(SELECT now() - interval '1 minute' AS at) c,
	(SELECT gen_random_uuid() AS org) o`, rows)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE agent.idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\nsweeper: inserted %d expired claims in %s\n", rows, time.Since(start).Round(time.Millisecond))

	s, err := New(pool, Config{
		Bound: bound, MaxPasses: math.MaxInt, Duty: duty,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	plane := idempotency.NewService(pool, idempotency.Config{})
	org := uuid.New()
	claims := targets[0]

	// claimFor runs the clients for d or until stop closes, and returns the
	// latency of every claim.
	claimFor := func(d time.Duration, stop <-chan struct{}) ([]time.Duration, error) {
		lat, _, err := benchkit.Clients(clients, d, stop, func(int, int) error {
			out, err := plane.Claim(ctx, org, "tool.email.send", uuid.NewString(), "hash", time.Minute)
			if err == nil && out.Kind != idempotency.KindClaimed {
				err = fmt.Errorf("claim of a new key answered %v", out.Kind)
			}
			return err
		})
		return lat, err
	}

	var (
		base, swept []time.Duration
		ratios      []float64 // each round's p99 with the sweep over its p99 without
		deleted     int
		sweeping    time.Duration
		passes      int
	)
	// Warm the pool and the plan caches.
	if _, err := claimFor(time.Second, nil); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rounds; r++ {
		baseLat, err := claimFor(phase, nil)
		if err != nil {
			t.Fatal(err)
		}
		base = append(base, baseLat...)

		stop := make(chan struct{})
		sweepErr := make(chan error, 1)
		go func() {
			defer close(stop)
			// The run loop of production, its passes paced by Duty, cut
			// off at the end of the phase.
			pctx, cancel := context.WithTimeout(ctx, phase)
			defer cancel()
			tr, err := s.sweep(pctx, claims)
			if err != nil && pctx.Err() == nil {
				sweepErr <- err
			}
			passes += tr.Passes
			deleted += tr.Deleted
			sweeping += tr.Duration
		}()
		lat, err := claimFor(phase, stop)
		if err != nil {
			t.Fatal(err)
		}
		<-stop
		select {
		case err := <-sweepErr:
			t.Fatal(err)
		default:
		}
		swept = append(swept, lat...)
		if len(lat) > 0 && len(baseLat) > 0 {
			ratios = append(ratios, float64(benchkit.Percentile(lat, 99))/float64(benchkit.Percentile(baseLat, 99)))
		}
		if deleted >= rows {
			break
		}
	}

	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM agent.idempotency_keys WHERE retain_until <= now()`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	bp50, bp99 := benchkit.Percentile(base, 50), benchkit.Percentile(base, 99)
	sp50, sp99 := benchkit.Percentile(swept, 50), benchkit.Percentile(swept, 99)
	fmt.Printf("sweeper: %d clients claiming new keys; bound %d; duty %g; phases of %s\n", clients, bound, duty, phase)
	fmt.Printf("%-26s %10s %10s %10s\n", "claim latency", "claims", "p50", "p99")
	fmt.Printf("%-26s %10d %10s %10s\n", "without the sweep", len(base), bp50, bp99)
	fmt.Printf("%-26s %10d %10s %10s\n", "with the sweep running", len(swept), sp50, sp99)
	fmt.Printf("p99 ratio %.2f× (target ≤ 1.25×)\n", float64(sp99)/float64(bp99))
	if len(ratios) > 0 {
		// The same ratio round by round: the machine's drift between
		// rounds weighs on each round's two phases alike.
		slices.Sort(ratios)
		fmt.Printf("per-round p99 ratios: median %.2f×, from %.2f× to %.2f× over %d rounds\n",
			ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], len(ratios))
	}
	// The rate counts the rows gone from the table: a pass the end of a
	// phase cut off during its commit may have committed without its
	// caller hearing so, and is missing from the passes' own count.
	gone := rows - left
	fmt.Printf("swept %d rows (%d counted by %d passes) over %s: %.0f rows/s; %d expired rows left\n",
		gone, deleted, passes, sweeping.Round(time.Millisecond), float64(gone)/sweeping.Seconds(), left)
}
