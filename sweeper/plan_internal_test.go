package sweeper

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/pgtest"
)

// TestTheSnapshotPassFindsAHoldingClaimByItsResource: the snapshot pass
// asks, of every snapshot past its minimum age that no Run names, whether
// a retained start claim still holds it. On 20,000 retained start claims
// of one organization and as many snapshots of it, the plan finds that
// claim through idempotency_keys_resource_idx (migration 00021). Before,
// it went through the (organization, scope, key) index and filtered the
// resource: each snapshot read its organization's every retained claim,
// and one pass did not finish in a minute on 1,000,000 starts. On Citus
// the coordinator's plan is of the distributed query: plain PostgreSQL
// alone.
func TestTheSnapshotPassFindsAHoldingClaimByItsResource(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("the plans are read on plain PostgreSQL")
	}
	b := setup(t)
	b.exec(t, `
WITH ss AS (
	INSERT INTO agent.saved_searches (id, organization_id, name, brief, version, created_by, created_at, updated_at)
	VALUES (gen_random_uuid(), $1, 'n', '{}', 1, 'a', now(), now()) RETURNING id),
snaps AS (
	INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
		saved_search_name, brief, baseline, content_hash, created_by, created_at, origin)
	SELECT gen_random_uuid(), $1, ss.id, 1, 'n', '{}', '{}', repeat('0', 64), 'a', now() - interval '30 days', 'api'
	FROM generate_series(1, 20000), ss RETURNING id)
INSERT INTO agent.idempotency_keys (id, organization_id, scope, key, request_hash, status, lease_token,
	resource_type, resource_id, response, claimed_at, lease_expires_at, retain_until)
SELECT gen_random_uuid(), $1, $2, 'k' || s.id, 'h', 'completed', gen_random_uuid(),
	'snapshot', s.id::text, '{}', now(), now(), now() + interval '1 day'
FROM snaps s`, b.org, idempotency.ScopeSavedSearchStart)
	b.exec(t, `VACUUM ANALYZE agent.idempotency_keys`)
	b.exec(t, `VACUUM ANALYZE agent.saved_search_snapshots`)

	args := pgx.NamedArgs{"now": nil, "all": true, "keys": []string{}, "limit": 1000,
		"min_age_us": SnapshotMinAge.Microseconds(), "scope": idempotency.ScopeSavedSearchStart}
	var plan []byte
	if err := b.db.QueryRow(b.ctx, "EXPLAIN (FORMAT JSON) "+snapshotOrphan.read, args).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		name, _ := n["Index Name"].(string)
		rel, _ := n["Relation Name"].(string)
		typ, _ := n["Node Type"].(string)
		nodes = append(nodes, strings.TrimSpace(typ+" "+rel+" "+name))
		subs, _ := n["Plans"].([]any)
		for _, s := range subs {
			if m, ok := s.(map[string]any); ok {
				walk(m)
			}
		}
	}
	var top []map[string]map[string]any
	if err := json.Unmarshal(plan, &top); err != nil || len(top) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	walk(top[0]["Plan"])
	all := strings.Join(nodes, " / ")
	if !strings.Contains(all, "idempotency_keys_resource_idx") || strings.Contains(all, "Seq Scan idempotency_keys") {
		t.Errorf("the snapshot pass's plan is %s; want its claim probe on idempotency_keys_resource_idx", all)
	}
}
