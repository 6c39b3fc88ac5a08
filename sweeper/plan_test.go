package sweeper

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// TestSnapshotPassCostsItsWindowNotTheOrganization: the snapshot pass's
// read costs its window and the claims its candidates name, whatever the
// size of the organization. One organization holds 20,000 retained start
// claims and their 20,000 snapshots (each with a Run, past the minimum
// age), and 500 older orphans whose claims have expired; 2,000 other
// organizations hold one claim each, so the statistics say an
// organization has few. Before migration 00021 the claim probe scanned the
// organization's start claims once per orphan (the planner, estimating
// one, chose it on every run), and the read walked every snapshot past the
// minimum age when it found fewer than a bound to delete.
//
// The read's plan, run: no sequential scan; the claims it probes, by their
// primary key; at most four bounds of snapshots read from
// saved_search_snapshots_created_idx; the 500 orphans returned. On Citus the
// coordinator's plan is of the distributed query: plain PostgreSQL alone.
func TestSnapshotPassCostsItsWindowNotTheOrganization(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("the plans are read on plain PostgreSQL")
	}
	b := setupSnapshots(t)
	const referenced, orphans, others = 20000, 500, 2000
	for _, q := range []string{
		// The orphans: frozen 30 days ago, their Runs gone, their claims
		// expired (kept: the sweeper has not reached them).
		`INSERT INTO agent.idempotency_keys (id, organization_id, scope, key, request_hash, status, lease_token,
			resource_type, resource_id, response, claimed_at, lease_expires_at, retain_until)
		SELECT md5('oc' || g)::uuid, @org::uuid, @scope::text, 'orphan-' || g, 'h', 'completed', gen_random_uuid(),
			'saved_search_start', md5('os' || g)::uuid::text, '{}', now() - interval '30 days',
			now() - interval '30 days', now() - interval '29 days'
		FROM generate_series(1, ` + itoa(orphans) + `) g`,
		`INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
			saved_search_name, brief, baseline, content_hash, created_at, claim_id)
		SELECT md5('os' || g)::uuid, @org::uuid, @search::uuid, 1, 'n', '{}', '{"items":[]}', repeat('0', 64),
			now() - interval '30 days' + g * interval '1 ms', md5('oc' || g)::uuid
		FROM generate_series(1, ` + itoa(orphans) + `) g`,
		// The referenced: frozen two days ago, each with its Run, and a
		// retained claim of the organization (the claim is what makes
		// the organization large).
		`INSERT INTO agent.idempotency_keys (id, organization_id, scope, key, request_hash, status, lease_token,
			resource_type, resource_id, response, claimed_at, lease_expires_at, retain_until)
		SELECT md5('rc' || g)::uuid, @org::uuid, @scope::text, 'live-' || g, 'h', 'completed', gen_random_uuid(),
			'saved_search_start', md5('rs' || g)::uuid::text, '{}', now(), now(), now() + interval '1 day'
		FROM generate_series(1, ` + itoa(referenced) + `) g`,
		`INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
			saved_search_name, brief, baseline, content_hash, created_at, claim_id)
		SELECT md5('rs' || g)::uuid, @org::uuid, @search::uuid, 1, 'n', '{}', '{"items":[]}', repeat('0', 64),
			now() - interval '2 days' + g * interval '1 ms', md5('rc' || g)::uuid
		FROM generate_series(1, ` + itoa(referenced) + `) g`,
		`INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, saved_search_id, snapshot_id,
			name, created_at, retain_until)
		SELECT gen_random_uuid(), @org::uuid, 'saved_search', 'saved_search:live-' || g, 'h', @search::uuid, md5('rs' || g)::uuid,
			'n', now() - interval '2 days', now() + interval '300 days'
		FROM generate_series(1, ` + itoa(referenced) + `) g`,
		`INSERT INTO agent.idempotency_keys (id, organization_id, scope, key, request_hash, status, lease_token,
			claimed_at, lease_expires_at, retain_until)
		SELECT gen_random_uuid(), gen_random_uuid(), @scope::text, 'k', 'h', 'processing', gen_random_uuid(),
			now(), now(), now() + interval '1 day'
		FROM generate_series(1, ` + itoa(others) + `) g`,
	} {
		if _, err := b.db.Exec(b.ctx, q, pgx.NamedArgs{"org": b.org, "search": b.search.ID, "scope": idempotency.ScopeSavedSearchStart}); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	if _, err := b.db.Exec(b.ctx, `VACUUM ANALYZE agent.idempotency_keys, agent.saved_search_snapshots, agent.runs`); err != nil {
		t.Fatal(err)
	}

	args := pgx.NamedArgs{"now": nil, "bound": DefaultBound, "limit": DefaultBound, "all": true, "keys": []string{},
		"min_age_us": SnapshotMinAge.Microseconds(), "scope": idempotency.ScopeSavedSearchStart}
	tx, err := b.db.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(b.ctx) }()
	var doc []byte
	if err := tx.QueryRow(b.ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+snapshotOrphan.read, args).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	var top []struct{ Plan planNode }
	if err := json.Unmarshal(doc, &top); err != nil || len(top) != 1 {
		t.Fatalf("plan %s: %v", doc, err)
	}
	plan := top[0].Plan
	var lines []string
	plan.walk(func(n planNode) {
		lines = append(lines, n.String())
		switch {
		case strings.HasPrefix(n.Type, "Seq Scan"):
			t.Errorf("a sequential scan: %s", n)
		case n.Relation == "idempotency_keys" && n.Loops > 0 && n.Index != "idempotency_keys_pkey":
			t.Errorf("claims probed by %s, not their primary key: %s", n.Index, n)
		case n.Index == "saved_search_snapshots_created_idx" && n.Rows*n.Loops > 4*DefaultBound:
			t.Errorf("%d snapshots read from the created_at index, want at most %d: %s",
				n.Rows*n.Loops, 4*DefaultBound, n)
		}
	})
	if plan.Rows != orphans {
		t.Errorf("the read returned %d snapshots, want the %d orphans", plan.Rows, orphans)
	}
	t.Logf("%d shared buffers hit or read:\n%s", plan.SharedHit+plan.SharedRead, strings.Join(lines, "\n"))
}

// planNode is a node of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON).
type planNode struct {
	Type       string     `json:"Node Type"`
	Relation   string     `json:"Relation Name"`
	Index      string     `json:"Index Name"`
	Rows       int        `json:"Actual Rows"`
	Loops      int        `json:"Actual Loops"`
	SharedHit  int        `json:"Shared Hit Blocks"`
	SharedRead int        `json:"Shared Read Blocks"`
	Plans      []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

func (n planNode) String() string {
	return strings.TrimSpace(n.Type+" "+n.Relation+" "+n.Index) +
		" (rows " + itoa(n.Rows) + ", loops " + itoa(n.Loops) + ", buffers " + itoa(n.SharedHit+n.SharedRead) + ")"
}

func itoa(n int) string { return strconv.Itoa(n) }
