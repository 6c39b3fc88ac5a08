package operator_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
)

// TestLeaseIndexBench measures what idempotency_keys_lease_idx (migration
// 00014, for the console's claim lists) costs the claim path: 16 workers
// claim and complete new keys for 3 s, in rounds alternating without and
// with the index, on the durable cluster of pgtest (fsync=on,
// synchronous_commit=on); it prints the medians and their ratio. A
// benchmark, not a timed test: SEARCHD_BENCH=1 (make bench-console).
func TestLeaseIndexBench(t *testing.T) {
	benchkit.Asked(t)
	ctx := context.Background()
	pool := benchkit.Pool{MaxConns: 16}.Open(t, pgtest.NewDurableDBURL(t))
	var fsync, sc string
	_ = pool.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit')`).Scan(&fsync, &sc)
	plane := idempotency.NewService(pool, idempotency.Config{})
	org := uuid.New()
	round := func() float64 {
		lat, _, err := benchkit.Clients(16, 3*time.Second, nil, func(int, int) error {
			out, err := plane.Claim(ctx, org, "tool.bench", uuid.NewString(), "h", time.Minute)
			if err != nil {
				return err
			}
			_, err = plane.Complete(ctx, out.Claim, idempotency.Completion{ResourceType: "x", ResourceID: "1"})
			return err
		})
		if err != nil {
			t.Error(err)
		}
		return float64(len(lat)) / 3
	}
	var without, with []float64
	for r := range 5 {
		if _, err := pool.Exec(ctx, `DROP INDEX IF EXISTS agent.idempotency_keys_lease_idx`); err != nil {
			t.Fatal(err)
		}
		without = append(without, round())
		if _, err := pool.Exec(ctx, `CREATE INDEX idempotency_keys_lease_idx ON agent.idempotency_keys (lease_expires_at, id)`); err != nil {
			t.Fatal(err)
		}
		with = append(with, round())
		fmt.Printf("round %d: without %.0f/s, with %.0f/s\n", r+1, without[r], with[r])
	}
	slices.Sort(without)
	slices.Sort(with)
	fmt.Printf("claim+complete, 16 workers, 5 rounds of 3 s, fsync=%s synchronous_commit=%s: median without the lease index %.0f/s, with it %.0f/s, ratio %.3f\n",
		fsync, sc, without[2], with[2], with[2]/without[2])
}
