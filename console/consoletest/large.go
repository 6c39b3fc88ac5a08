package consoletest

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Large is what [SeedLarge] made: the records that make the console's
// heaviest pages.
type Large struct {
	// Search is a saved search at the documented limits: a query of 2000
	// characters, filters of 16 KiB and a baseline of 10000 items of 100
	// characters (about 1 MiB), HTML-heavy (<, & and ") so that escaping
	// makes the most of it.
	Search uuid.UUID
	// Older and Newer are two snapshots of Search whose baselines share
	// no item: comparing them adds 10000 items and removes 10000.
	Older, Newer uuid.UUID
	// Unbounded is a snapshot of Search written before the limits, as a
	// database may hold one: a 1 MiB filter, 2000 items of 1000
	// characters.
	Unbounded uuid.UUID
	// Run is a direct Run whose input, written before the limit, is
	// 2 MiB.
	Run uuid.UUID
	// Job is a provider job of Run whose result is 1 MiB, the default
	// callback body limit.
	Job uuid.UUID
}

// SeedLarge writes the records of [Large] in org, straight into the
// tables as a database from before the limits may hold them (the API
// would refuse the unbounded ones), and returns their ids.
func SeedLarge(ctx context.Context, pool *pgxpool.Pool, org uuid.UUID) (*Large, error) {
	l := &Large{Search: uuid.New(), Older: uuid.New(), Newer: uuid.New(), Unbounded: uuid.New(), Run: uuid.New(), Job: uuid.New()}
	// An item: its number, then HTML-heavy text, 100 characters.
	const item = `lpad(i::text, 6, '0') || '-' || repeat('<&"', 31)`
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO agent.saved_searches (id, organization_id, name, brief, created_at, updated_at)
			VALUES ($1, $2, 'at the limits', jsonb_build_object('query', repeat('<"', 1000),
				'filters', jsonb_build_object('html', repeat('<', 16000))), now(), now())`,
			[]any{l.Search, org}},
		{`INSERT INTO agent.saved_search_baselines (saved_search_id, organization_id, items, updated_at)
			SELECT $1, $2, array_agg(` + item + ` ORDER BY i), now() FROM generate_series(1, 10000) i`,
			[]any{l.Search, org}},
		// Two snapshots with disjoint baselines, a filter going from null
		// to a value and the cursor from none to one.
		{`INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
				saved_search_name, brief, baseline, content_hash, created_by, created_at)
			SELECT s.id, $2, $3, s.v, 'at the limits',
				jsonb_build_object('query', repeat('<"', 1000), 'filters', jsonb_build_object('html', repeat('<', 16000), 'since', s.since)),
				jsonb_build_object('items', (SELECT jsonb_agg('v' || s.v || '-' || ` + item + ` ORDER BY i) FROM generate_series(1, 10000) i),
					'cursor', s.cur),
				repeat(s.v::text, 64), 'seed', now() - make_interval(mins => 10 - s.v::int)
			FROM (VALUES ($1::uuid, 1, 'null'::jsonb, NULL::text), ($4::uuid, 2, '"2026-01-01"'::jsonb, 'page-2')) s(id, v, since, cur)`,
			[]any{l.Older, org, l.Search, l.Newer}},
		{`INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
				saved_search_name, brief, baseline, content_hash, created_at)
			SELECT $1, $2, $3, 3, 'at the limits', jsonb_build_object('query', 'q', 'filters', jsonb_build_object('s', repeat('<', 1 << 20))),
				jsonb_build_object('items', (SELECT jsonb_agg(repeat('<', 990) || i ORDER BY i) FROM generate_series(1, 2000) i), 'cursor', repeat('c', 100000)),
				repeat('3', 64), now()`,
			[]any{l.Unbounded, org, l.Search}},
		{`INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, name, input, created_at, retain_until)
			VALUES ($1, $2, 'capability', 'direct:large-' || $3, 'h', 'large', jsonb_build_object('s', repeat('<', 2 << 20)),
				now(), now() + interval '1 day')`,
			[]any{l.Run, org, l.Run.String()}},
		{`INSERT INTO agent.provider_jobs (id, organization_id, run_id, provider, provider_job_id, status, result, created_at, updated_at)
			VALUES ($1, $2, $3, 'acme', 'large-' || $4, 'succeeded', jsonb_build_object('s', repeat('<', (1 << 20) - 16)), now(), now())`,
			[]any{l.Job, org, l.Run, l.Job.String()}},
	} {
		if _, err := pool.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			return nil, fmt.Errorf("consoletest: seeding the large records: %w", err)
		}
	}
	return l, nil
}
