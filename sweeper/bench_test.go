package sweeper

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
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

	seedExpiredClaims(t, pool, rows)

	// A run's budget is the phase: each sweep phase is one run, cut off
	// at the end of the phase by its budget (or, mid-pass, by the phase's
	// context).
	s, err := New(pool, Config{
		Bound: bound, Duty: duty, Budget: phase,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	plane := idempotency.NewService(pool, idempotency.Config{})
	org := uuid.New()

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
			// A run of production, its passes paced by Duty, cut off at
			// the end of the phase.
			pctx, cancel := context.WithTimeout(ctx, phase)
			defer cancel()
			rep, err := s.RunOnce(pctx)
			if err != nil && pctx.Err() == nil {
				sweepErr <- err
			}
			tr := rep.Claims
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

	left := expiredLeft(t, pool)
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

// seedExpiredClaims inserts rows expired claims on pool, in one statement,
// and vacuums the table: 30-day tool claims of one organization whose
// retention passed a minute to rows milliseconds ago, a millisecond apart.
func seedExpiredClaims(t *testing.T, pool *pgxpool.Pool, rows int) {
	t.Helper()
	ctx := context.Background()
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
}

// expiredLeft returns the number of claims past retention on pool.
func expiredLeft(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var left int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM agent.idempotency_keys WHERE retain_until <= now()`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	return left
}

// sweepSummary is the last line of `searchd sweep`'s report.
var sweepSummary = regexp.MustCompile(`(?m)^swept in (\S+): read (\d+), deleted (\d+)`)

// TestSweepDrainBench measures what one `searchd sweep` (the binary, built
// from this checkout, at its defaults: no setting but DATABASE_URL) takes
// to drain a table of expired claims on a durable cluster: its wall time
// and the rows it deleted per second, first with nothing else running,
// then again on a fresh backlog with clients claiming new keys
// throughout, whose claim latency is compared with the same clients'
// without a sweep, in a phase before the drain and one after it (pooled,
// so the machine's drift weighs on both sides). A measurement, not a timed
// assertion, so it runs only when asked:
//
//	SEARCHD_BENCH=1 go test -run TestSweepDrainBench -v -timeout 30m ./sweeper/
//
// SEARCHD_BENCH_ROWS (default 1000000 expired claims), SEARCHD_BENCH_CLIENTS
// (default 16) and SEARCHD_BENCH_SECONDS (default 15, each phase without
// the sweep) size it.
func TestSweepDrainBench(t *testing.T) {
	benchkit.Asked(t)
	var (
		rows    = benchkit.Int("SEARCHD_BENCH_ROWS", 1_000_000)
		clients = benchkit.Int("SEARCHD_BENCH_CLIENTS", 16)
		phase   = time.Duration(benchkit.Float("SEARCHD_BENCH_SECONDS", 15) * float64(time.Second))
		ctx     = context.Background()
	)
	dbURL := pgtest.NewDurableDBURL(t)
	pool := benchkit.Pool{MaxConns: clients + 2, Eager: true}.Open(t, dbURL)
	fmt.Printf("\nsweeper: database %s\n", pgtest.DurableSettings(t))
	bin := filepath.Join(t.TempDir(), "searchd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/searchd/searchd/cmd/searchd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// sweep runs `searchd sweep` once at its defaults and returns its
	// wall time and the rows it deleted, as it printed them.
	sweep := func() (time.Duration, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "sweep")
		cmd.Env = []string{"DATABASE_URL=" + dbURL}
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if err != nil {
			t.Fatalf("searchd sweep: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		}
		m := sweepSummary.FindStringSubmatch(stdout.String())
		if m == nil {
			t.Fatalf("searchd sweep printed no summary:\n%s", stdout.String())
		}
		deleted, _ := strconv.Atoi(m[3])
		fmt.Printf("sweeper: searchd sweep printed:\n%s", stdout.String())
		return wall, deleted
	}

	plane := idempotency.NewService(pool, idempotency.Config{})
	org := uuid.New()
	// claimFor runs the clients for d or until stop closes, and returns
	// the latency of every claim.
	claimFor := func(d time.Duration, stop <-chan struct{}) []time.Duration {
		t.Helper()
		lat, _, err := benchkit.Clients(clients, d, stop, func(int, int) error {
			out, err := plane.Claim(ctx, org, "tool.email.send", uuid.NewString(), "hash", time.Minute)
			if err == nil && out.Kind != idempotency.KindClaimed {
				err = fmt.Errorf("claim of a new key answered %v", out.Kind)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return lat
	}

	// 1. The drain alone.
	seedExpiredClaims(t, pool, rows)
	aloneWall, aloneDeleted := sweep()
	aloneLeft := expiredLeft(t, pool)

	// 2. The drain under claims: without, with, without.
	seedExpiredClaims(t, pool, rows)
	claimFor(time.Second, nil) // warm the pool and the plan caches
	base := claimFor(phase, nil)
	stop := make(chan struct{})
	var (
		loadWall    time.Duration
		loadDeleted int
	)
	go func() {
		defer close(stop)
		loadWall, loadDeleted = sweep()
	}()
	during := claimFor(24*time.Hour, stop)
	<-stop
	base = append(base, claimFor(phase, nil)...)
	loadLeft := expiredLeft(t, pool)

	bp50, bp99 := benchkit.Percentile(base, 50), benchkit.Percentile(base, 99)
	dp50, dp99 := benchkit.Percentile(during, 50), benchkit.Percentile(during, 99)
	fmt.Printf("sweeper: one searchd sweep at its defaults draining %d expired claims; load average %s\n", rows, benchkit.LoadAverage())
	fmt.Printf("%-34s %12s %12s %10s %12s\n", "drain", "wall time", "deleted", "left", "rows/s")
	fmt.Printf("%-34s %12s %12d %10d %12.0f\n", "alone", aloneWall.Round(time.Millisecond), aloneDeleted, aloneLeft,
		float64(aloneDeleted)/aloneWall.Seconds())
	fmt.Printf("%-34s %12s %12d %10d %12.0f\n", fmt.Sprintf("with %d clients claiming", clients), loadWall.Round(time.Millisecond),
		loadDeleted, loadLeft, float64(loadDeleted)/loadWall.Seconds())
	fmt.Printf("%-34s %10s %10s %10s\n", "claim latency", "claims", "p50", "p99")
	fmt.Printf("%-34s %10d %10s %10s\n", "without the sweep (before, after)", len(base), bp50, bp99)
	fmt.Printf("%-34s %10d %10s %10s\n", "during the drain", len(during), dp50, dp99)
	fmt.Printf("during/without: p50 %.2f×, p99 %.2f×\n", float64(dp50)/float64(bp50), float64(dp99)/float64(bp99))
}
