package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// TestStatsReadsThePendingAndFailedRowsAlone: every serve reads the
// backlog every 15 s, so its statements must cost the pending and failed
// rows, never the dispatched ones (nearly all): on 20,000 dispatched rows,
// 3 pending and 1 failed, each plan is an index scan of a partial index,
// with no sequential scan. (The statement before issue 35.6 filtered
// state IN ('pending', 'failed'), which no partial index serves: a
// sequential scan of the whole table.) On Citus the coordinator's plan
// is of the distributed query, not of a shard: plain PostgreSQL alone.
func TestStatsReadsThePendingAndFailedRowsAlone(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("the plans are read on plain PostgreSQL")
	}
	db := pgtest.NewDB(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `
		WITH r AS (
			INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, name, created_at, retain_until)
			SELECT gen_random_uuid(), gen_random_uuid(), 'capability', 'direct:' || i, 'h', 'n',
				now() - i * interval '1 second', now() + interval '1 day'
			FROM generate_series(1, 20004) i
			RETURNING id, organization_id, created_at
		), n AS (SELECT r.*, row_number() OVER () AS i FROM r)
		INSERT INTO agent.run_dispatches (run_id, organization_id, state, next_attempt_at, created_at, dispatched_at, failed_at)
		SELECT id, organization_id,
			CASE WHEN i <= 3 THEN 'pending' WHEN i = 4 THEN 'failed' ELSE 'dispatched' END,
			created_at, created_at,
			CASE WHEN i > 4 THEN created_at END, CASE WHEN i = 4 THEN created_at END
		FROM n`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `VACUUM ANALYZE agent.run_dispatches`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, sql, index string
		args             []any
	}{
		{"pending", dispatchPendingStats, "run_dispatches_pending_age_idx", []any{nil}},
		{"failed", dispatchFailedCount, "run_dispatches_failed_idx", nil},
	} {
		var plan []byte
		if err := db.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+tc.sql, tc.args...).Scan(&plan); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var nodes []string
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			nodes = append(nodes, strings.TrimSpace(asString(n["Node Type"])+" "+asString(n["Index Name"])))
			subs, _ := n["Plans"].([]any)
			for _, s := range subs {
				if m, ok := s.(map[string]any); ok {
					walk(m)
				}
			}
		}
		var top []map[string]map[string]any
		if err := json.Unmarshal(plan, &top); err != nil || len(top) != 1 {
			t.Fatalf("%s: plan %s: %v", tc.name, plan, err)
		}
		walk(top[0]["Plan"])
		all := strings.Join(nodes, " / ")
		if strings.Contains(all, "Seq Scan") || !strings.Contains(all, tc.index) {
			t.Errorf("the %s count's plan is %s; want a scan of %s and no sequential scan", tc.name, all, tc.index)
		}
	}
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}
