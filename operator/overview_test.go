package operator_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/operator"
)

// referenceOverview is the overview's meaning written plainly: one state
// per claim (expired past retention; else completed by status; else in
// flight with a live lease, stuck without) and the hour it was claimed in,
// within the chart's hours. Overview must agree with it exactly.
const referenceOverview = `
WITH c AS (SELECT now() AS now, date_trunc('hour', now()) - ($1::int - 1) * interval '1 hour' AS since)
SELECT k.scope,
	CASE WHEN k.retain_until <= c.now THEN 'expired'
		WHEN k.status = 'completed' THEN 'completed'
		WHEN k.lease_expires_at > c.now THEN 'in_flight'
		ELSE 'stuck' END AS state,
	CASE WHEN k.claimed_at >= c.since THEN date_trunc('hour', k.claimed_at) END AS hour,
	count(*)
FROM agent.idempotency_keys k, c
GROUP BY 1, 2, 3`

// TestOverviewAgreesWithTheStatesClaimByClaim seeds claims of every state
// across three scopes, claimed over the last 30 hours (some before the
// chart), and compares Overview's counts and claim buckets with the plain
// reference query.
func TestOverviewAgreesWithTheStatesClaimByClaim(t *testing.T) {
	pool := pgtest.NewDB(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO agent.idempotency_keys (id, organization_id, scope, key, request_hash, status, lease_token,
			response, claimed_at, lease_expires_at, retain_until)
		SELECT gen_random_uuid(), gen_random_uuid(),
			(ARRAY['tool.email.send', 'webhook.acme', 'surface.saved_search.start'])[g % 3 + 1], 'k-' || g, 'h',
			CASE WHEN g % 5 < 3 THEN 'completed' ELSE 'processing' END, gen_random_uuid(),
			CASE WHEN g % 5 < 3 THEN '{"ok":true}'::jsonb END,
			claimed, least(lease, retain), retain
		FROM generate_series(1, 5000) g,
			LATERAL (SELECT now() - (g % 1800) * interval '1 minute' AS claimed,
				CASE WHEN g % 7 < 3 THEN now() + interval '10 minutes'
					ELSE now() - (g % 1800) * interval '1 minute' + interval '30 seconds' END AS lease,
				CASE WHEN g % 11 = 0 THEN now() - interval '1 second' ELSE now() + interval '1 day' END AS retain) v`); err != nil {
		t.Fatal(err)
	}
	ov, err := operator.NewStore(pool, nil).Overview(ctx, 24)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, referenceOverview, 24)
	if err != nil {
		t.Fatal(err)
	}
	wantCounts := map[string]*operator.ScopeCount{}
	wantHours := map[string]int64{}
	for rows.Next() {
		var scope, state string
		var hour *time.Time
		var n int64
		if err := rows.Scan(&scope, &state, &hour, &n); err != nil {
			t.Fatal(err)
		}
		c := wantCounts[scope]
		if c == nil {
			c = &operator.ScopeCount{Scope: scope}
			wantCounts[scope] = c
		}
		switch state {
		case "expired":
			c.Expired += n
		case "completed":
			c.Completed += n
		case "in_flight":
			c.InFlight += n
		case "stuck":
			c.Stuck += n
		}
		if hour != nil && state != "expired" {
			wantHours[fmt.Sprintf("%s %s", hour.UTC().Format(time.RFC3339), state)] += n
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range ov.Counts {
		w := wantCounts[c.Scope]
		if w == nil || *w != c {
			t.Errorf("counts of %s = %+v, want %+v", c.Scope, c, w)
		}
		delete(wantCounts, c.Scope)
	}
	if len(wantCounts) != 0 {
		t.Errorf("scopes missing from the overview: %v", slices.Sorted(maps.Keys(wantCounts)))
	}
	gotHours := map[string]int64{}
	for _, b := range ov.Buckets {
		if b.Kind == "claim" {
			gotHours[fmt.Sprintf("%s %s", b.Hour.UTC().Format(time.RFC3339), b.What)] += b.Count
		}
	}
	if !maps.Equal(gotHours, wantHours) {
		for _, k := range slices.Sorted(maps.Keys(wantHours)) {
			if gotHours[k] != wantHours[k] {
				t.Errorf("claims of %s: %d, want %d", k, gotHours[k], wantHours[k])
			}
		}
		for k := range gotHours {
			if _, ok := wantHours[k]; !ok {
				t.Errorf("claims of %s: %d, want none", k, gotHours[k])
			}
		}
	}
	if len(wantHours) < 40 {
		t.Fatalf("the seed reached only %d hour-state buckets: it does not exercise the chart", len(wantHours))
	}
}
