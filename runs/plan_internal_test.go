package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// TestListFiltersAreServedByAnIndex: on a large organization, every
// combination of List's filters reads a page through an index, with the
// generic plan a cached statement ends up with as well as a custom one,
// and reads about a page of rows, not the organization's Runs. The
// organization holds 40,000 succeeded Runs, of one saved search and
// direct, and, older than all of them, 40 Runs in each other status; 2,000
// other organizations hold one Run each. A rare status read along
// runs_org_created_idx would walk the 40,000 first: migration 00025's
// index is what keeps it a page. On Citus the coordinator's plan is of
// the distributed query: plain PostgreSQL alone.
func TestListFiltersAreServedByAnIndex(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("the plans are read on plain PostgreSQL")
	}
	ctx := context.Background()
	db := pgtest.NewDB(t)
	org, search, snap := uuid.New(), uuid.New(), uuid.New()
	for _, q := range []string{
		`INSERT INTO agent.saved_searches (id, organization_id, name, brief, created_at, updated_at)
		VALUES (@search, @org, 'n', '{"query":"q"}', now(), now())`,
		`INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
			saved_search_name, brief, baseline, content_hash, created_at)
		VALUES (@snap, @org, @search, 1, 'n', '{}', '{"items":[]}', repeat('0', 64), now())`,
		// The rare statuses, oldest: 40 each, half of the saved search.
		`INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, saved_search_id, snapshot_id,
			name, status, created_at, retain_until)
		SELECT gen_random_uuid(), @org, 'saved_search', 'saved_search:rare-' || g, 'h', @search, @snap, 'n',
			(ARRAY['queued','dispatched','running','failed','cancelled'])[1 + g % 5],
			now() - interval '2 days' + g * interval '1 ms', now() + interval '300 days'
		FROM generate_series(1, 100) g`,
		`INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, name, status, created_at, retain_until)
		SELECT gen_random_uuid(), @org, 'capability', 'direct:rare-' || g, 'h', 'c',
			(ARRAY['queued','dispatched','running','failed','cancelled'])[1 + g % 5],
			now() - interval '2 days' + g * interval '1 ms', now() + interval '300 days'
		FROM generate_series(1, 100) g`,
		// The succeeded, newer: half of the saved search, half direct.
		`INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, saved_search_id, snapshot_id,
			name, status, created_at, retain_until)
		SELECT gen_random_uuid(), @org, 'saved_search', 'saved_search:k-' || g, 'h', @search, @snap, 'n', 'succeeded',
			now() - interval '1 day' + g * interval '1 ms', now() + interval '300 days'
		FROM generate_series(1, 20000) g`,
		`INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, name, status, created_at, retain_until)
		SELECT gen_random_uuid(), @org, 'capability', 'direct:k-' || g, 'h', 'c', 'succeeded',
			now() - interval '1 day' + g * interval '1 ms', now() + interval '300 days'
		FROM generate_series(1, 20000) g`,
		`INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, name, status, created_at, retain_until)
		SELECT gen_random_uuid(), gen_random_uuid(), 'capability', 'direct:k', 'h', 'c', 'succeeded',
			now(), now() + interval '300 days'
		FROM generate_series(1, 2000) g`,
		`VACUUM ANALYZE agent.runs`,
	} {
		if _, err := db.Exec(ctx, q, pgxNamed{"org": org, "search": search, "snap": snap}.args()); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	from := time.Now().Add(-3 * 24 * time.Hour)
	to := time.Now().Add(-36 * time.Hour) // before every succeeded Run
	cases := []ListParams{
		{},
		{Status: StatusQueued},
		{Status: StatusSucceeded},
		{SavedSearchID: &search},
		{IdempotencyKey: "rare-7"},
		{IdempotencyKey: "k-19990", Status: StatusSucceeded},
		{IdempotencyKey: "k-7", SavedSearchID: &search, CreatedAfter: from},
		{CreatedAfter: from},
		{CreatedBefore: to},
		{CreatedAfter: from, CreatedBefore: to},
		{Status: StatusRunning, CreatedAfter: from, CreatedBefore: to},
		{SavedSearchID: &search, Status: StatusFailed},
		{SavedSearchID: &search, CreatedBefore: to},
		{SavedSearchID: &search, Status: StatusCancelled, IdempotencyKey: "rare-5", CreatedAfter: from, CreatedBefore: to},
	}
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		for i, p := range cases {
			query, args := runListQuery(p, []any{org, nil, nil, DefaultListLimit + 1})
			name := fmt.Sprintf("list_%s_%d", mode, i)
			if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+query); err != nil {
				t.Fatal(err)
			}
			var doc []byte
			if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE "+name+"("+literals(args)+")").Scan(&doc); err != nil {
				t.Fatalf("%+v: %v", p, err)
			}
			var top []struct{ Plan planNode }
			if err := json.Unmarshal(doc, &top); err != nil || len(top) != 1 {
				t.Fatalf("plan %s: %v", doc, err)
			}
			var lines []string
			read := 0
			top[0].Plan.walk(func(n planNode) {
				lines = append(lines, n.String())
				if strings.Contains(n.Type, "Seq Scan") {
					t.Errorf("%s %+v: a sequential scan", mode, p)
				}
				if strings.Contains(n.Type, "Scan") {
					read += (n.Rows + n.Removed) * max(n.Loops, 1)
				}
			})
			// A page of 51 rows, and of rows the filter took out those a
			// combination's second filter (the saved search beside a
			// status, the instants) costs: never the organization's Runs.
			if read > 500 {
				t.Errorf("%s %+v read %d rows:\n%s", mode, p, read, strings.Join(lines, "\n"))
			}
			t.Logf("%s %+v read %d rows: %s", mode, p, read, strings.Join(lines, "; "))
		}
	}
}

// pgxNamed are named arguments.
type pgxNamed map[string]any

func (n pgxNamed) args() any { return pgx.NamedArgs(n) }

// literals writes args as the SQL literals of an EXECUTE.
func literals(args []any) string {
	var out []string
	for _, a := range args {
		switch v := a.(type) {
		case nil:
			out = append(out, "NULL")
		case uuid.UUID:
			out = append(out, "'"+v.String()+"'::uuid")
		case int:
			out = append(out, fmt.Sprint(v))
		case string:
			out = append(out, "'"+strings.ReplaceAll(v, "'", "''")+"'")
		case []string:
			var q []string
			for _, s := range v {
				q = append(q, "'"+strings.ReplaceAll(s, "'", "''")+"'")
			}
			out = append(out, "ARRAY["+strings.Join(q, ",")+"]::text[]")
		case time.Time:
			out = append(out, "'"+v.Format(time.RFC3339Nano)+"'::timestamptz")
		default:
			panic(fmt.Sprintf("no literal for %T", a))
		}
	}
	return strings.Join(out, ", ")
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	Type    string     `json:"Node Type"`
	Index   string     `json:"Index Name"`
	Rows    int        `json:"Actual Rows"`
	Loops   int        `json:"Actual Loops"`
	Removed int        `json:"Rows Removed by Filter"`
	Plans   []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

func (n planNode) String() string {
	return fmt.Sprintf("%s %s (rows %d, removed %d, loops %d)", n.Type, n.Index, n.Rows, n.Removed, n.Loops)
}
