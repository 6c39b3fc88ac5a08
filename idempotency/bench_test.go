package idempotency

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
)

// TestBenchReport measures the plane against the floor: the same SQL issued
// raw through pgx, on the same pool and database, in alternating rounds, and
// prints medians and ratios. It is a measurement, not a timed assertion, so
// it runs only when asked:
//
//	SEARCHD_BENCH=1 go test -run TestBenchReport -v ./idempotency/
//
// SEARCHD_BENCH_ROUNDS (default 7) and SEARCHD_BENCH_OPS (default 2000 per
// serial round) size it.
func TestBenchReport(t *testing.T) {
	benchkit.Asked(t)
	rounds := benchkit.Int("SEARCHD_BENCH_ROUNDS", 7)
	ops := benchkit.Int("SEARCHD_BENCH_OPS", 2000)
	ctx := context.Background()
	// On a durable cluster (fsync and synchronous_commit on), so every
	// claim pays its WAL flush as it does in production.
	pool := benchkit.Pool{MaxConns: 16}.Open(t, pgtest.NewDurableDBURL(t))
	svc := NewService(pool, Config{})
	org := uuid.New()
	const scope, hash, lease = "tool.bench", "h", time.Minute
	retention := ToolRetention

	rawClaim := func(key string) (*Record, error) {
		rec, err := scanRecord(pool.QueryRow(ctx, claimInsert, pgx.StrictNamedArgs{
			"id": uuid.New(), "org": org, "scope": scope, "key": key, "request_hash": hash, "lease_token": uuid.New(),
			"lease_us": lease.Microseconds(), "retention_us": retention.Microseconds(), "now": nil,
		}))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		return rec, err
	}
	completion := Completion{ResourceType: "bench", ResourceID: "1", Response: []byte(`{"ok":true}`)}

	type measure struct {
		name, unit string
		target     string
		higher     bool // true: throughput, the ratio is plane/raw
		plane, raw func(round int) (float64, error)
	}
	serial := func(f func(key string) error) func(int) (float64, error) {
		return func(round int) (float64, error) {
			keys := make([]string, ops)
			for i := range keys {
				keys[i] = uuid.NewString()
			}
			start := time.Now()
			for _, k := range keys {
				if err := f(k); err != nil {
					return 0, err
				}
			}
			return float64(time.Since(start).Microseconds()) / float64(ops), nil
		}
	}
	// A completed key every replay round reads.
	out, err := svc.Claim(ctx, org, scope, "replayed", hash, lease)
	if err != nil || out.Kind != KindClaimed {
		t.Fatalf("seed claim: %v %v", out.Kind, err)
	}
	if ok, err := svc.Complete(ctx, out.Claim, completion); !ok || err != nil {
		t.Fatalf("seed complete: %v %v", ok, err)
	}
	concurrent := func(f func(key string) error) func(int) (float64, error) {
		return func(int) (float64, error) {
			lat, elapsed, err := benchkit.Clients(16, 2*time.Second, nil, func(int, int) error { return f(uuid.NewString()) })
			if err != nil {
				return 0, err
			}
			return float64(len(lat)) / elapsed.Seconds(), nil
		}
	}
	measures := []measure{
		{
			name: "claim + complete, serial", unit: "µs/op", target: "≤ 1.30×",
			plane: serial(func(k string) error {
				out, err := svc.Claim(ctx, org, scope, k, hash, lease)
				if err != nil || out.Kind != KindClaimed {
					return fmt.Errorf("claim: %v %v", out.Kind, err)
				}
				_, err = svc.Complete(ctx, out.Claim, completion)
				return err
			}),
			raw: serial(func(k string) error {
				rec, err := rawClaim(k)
				if err != nil || rec == nil {
					return fmt.Errorf("raw claim: %v", err)
				}
				_, err = ScanRecord(pool.QueryRow(ctx, claimComplete, pgx.StrictNamedArgs{
					"org": org, "id": rec.ID, "lease_token": rec.LeaseToken, "resource_type": completion.ResourceType,
					"resource_id": completion.ResourceID, "response": string(completion.Response),
				}), true, false)
				return err
			}),
		},
		{
			name: "replay of a completed key, serial", unit: "µs/op", target: "≤ 1.50×",
			plane: serial(func(string) error {
				out, err := svc.Claim(ctx, org, scope, "replayed", hash, lease)
				if err != nil || out.Kind != KindCompleted {
					return fmt.Errorf("replay: %v %v", out.Kind, err)
				}
				return nil
			}),
			raw: serial(func(string) error {
				if rec, err := rawClaim("replayed"); err != nil || rec != nil {
					return fmt.Errorf("raw replay insert: %v %v", rec, err)
				}
				_, err := scanRecord(pool.QueryRow(ctx, claimGet, org, scope, "replayed", nil))
				return err
			}),
		},
		{
			name: "new claims, 16 concurrent", unit: "claims/s", target: "≥ 0.80×", higher: true,
			plane: concurrent(func(k string) error {
				out, err := svc.Claim(ctx, org, scope, k, hash, lease)
				if err != nil || out.Kind != KindClaimed {
					return fmt.Errorf("claim: %v %v", out.Kind, err)
				}
				return nil
			}),
			raw: concurrent(func(k string) error {
				rec, err := rawClaim(k)
				if err != nil || rec == nil {
					return fmt.Errorf("raw claim: %v", err)
				}
				return nil
			}),
		},
	}

	fmt.Printf("\ndatabase %s\n", pgtest.DurableSettings(t))
	fmt.Printf("idempotency plane vs raw pgx, %d rounds, %d serial ops per round (median of rounds)\n", rounds, ops)
	fmt.Printf("%-36s %14s %14s %8s %8s\n", "measure", "plane", "raw", "ratio", "target")
	for _, m := range measures {
		var planes, raws []float64
		for r := range rounds {
			// Alternate which runs first, so drift favours neither.
			first, second := m.plane, m.raw
			if r%2 == 1 {
				first, second = m.raw, m.plane
			}
			a, err := first(r)
			if err != nil {
				t.Fatal(err)
			}
			b, err := second(r)
			if err != nil {
				t.Fatal(err)
			}
			if r%2 == 1 {
				a, b = b, a
			}
			planes, raws = append(planes, a), append(raws, b)
		}
		p, r := median(planes), median(raws)
		fmt.Printf("%-36s %9.1f %-4s %9.1f %-4s %7.2f× %8s\n", m.name, p, shortUnit(m.unit), r, shortUnit(m.unit), p/r, m.target)
	}
}

func shortUnit(u string) string {
	if u == "claims/s" {
		return "/s"
	}
	return "µs"
}

// median is the upper middle of xs: the same element with an odd number
// of rounds (the default 7) as [benchkit.Median].
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
