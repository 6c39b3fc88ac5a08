package migrations_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// distColumn is the column every tenant table is distributed by, on a
// distributed engine such as Citus (docs/scaling.md).
const distColumn = "organization_id"

// distributed are the tables sharded by organization_id and co-located, so
// that everything one organization does runs on one shard group. Each must
// have a NOT NULL organization_id, and every primary key, unique constraint,
// unique index and foreign key of it must include that column (a foreign key
// on both sides, matched to each other), and reference only a distributed
// table: a shard can only enforce a key on the rows it holds.
var distributed = []string{
	"agent.idempotency_keys",
	"agent.provider_jobs",
	"agent.runs",
	"agent.saved_search_baselines",
	"agent.saved_search_schedules",
	"agent.saved_search_snapshots",
	"agent.saved_searches",
	"agent.schedule_occurrences",
	"agent.tool_call_resolutions",
}

// notDistributed are the tables that are not sharded by organization, each
// with the reason. A table that is in neither list fails the test: whoever
// adds one decides which it is.
var notDistributed = map[string]string{
	"agent.webhook_drops": "the drop audit: an unknown_job drop names no organization (organization_id is NULL), " +
		"so the row has no shard to go to; append-only and off the claim path, it stays a local table on the coordinator",
	"agent.provider_inbox": "stage one of a provider callback: an arrival is unique by (provider, delivery_id) " +
		"across organizations, because a delivery must be landed before its path is trusted to name a tenant " +
		"(an unknown path names none); it stays a local table on the coordinator, which lands and applies arrivals",
	"agent.provider_inbox_copies": "the copy counters of agent.provider_inbox, keyed by its id; local beside it",
	"agent.claim_releases": "the operator's audit of force-releases: rare, append-only and read across " +
		"organizations by the console's release log, off the claim path; a local table on the coordinator",
	"agent.sweeper_runs": "the sweeper's run log: one row per run over every organization, naming none; " +
		"a local table on the coordinator",
	"agent.console_sessions": "the console's sessions: a session is found by the secret in its cookie alone, before " +
		"anyone knows whose it is, and an operator's session names no organization (organization_id NULL); rare " +
		"(a sign-in, then a read per console page) and off the claim path, it stays a local table on the coordinator",
	"public.goose_db_version": "the migration bookkeeping of goose: one row per applied migration, " +
		"read and written by `searchd migrate` alone; it stays on the coordinator, which applies DDL to every shard",
}

// shardingReport is what checkSharding found.
type shardingReport struct {
	unlisted   []string // tables in neither list
	vanished   []string // listed tables that do not exist
	violations []string // keys of distributed tables without organization_id, and the like
}

// TestShardingKeysCarryOrganization asserts, from pg_catalog, that the
// schema can be distributed by organization_id: every table is listed as
// distributed or not (with a reason), and every key of a distributed table
// includes organization_id. A migration that adds a table, or a key that
// would not hold per shard, fails here.
func TestShardingKeysCarryOrganization(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	rep, err := checkSharding(t.Context(), db, distributed, notDistributed)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range rep.unlisted {
		t.Errorf("table %s is neither distributed nor listed as not distributed: add it to distributed "+
			"(and make its keys include %s) or to notDistributed with the reason", name, distColumn)
	}
	for _, name := range rep.vanished {
		t.Errorf("table %s is listed but does not exist: remove it from the list", name)
	}
	for _, v := range rep.violations {
		t.Error(v)
	}
}

// TestShardingCheckCatchesPlantedViolations proves the check can fail: on a
// database with a table of each kind of mistake, it must report each one.
func TestShardingCheckCatchesPlantedViolations(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := t.Context()
	if _, err := db.Exec(ctx, `
		CREATE TABLE agent.planted_unlisted (id uuid PRIMARY KEY);
		ALTER TABLE agent.saved_search_snapshots ADD CONSTRAINT planted_unique UNIQUE (content_hash);
		CREATE UNIQUE INDEX planted_unique_index ON agent.runs (start_key, created_at);
		ALTER TABLE agent.provider_jobs ADD COLUMN planted_run uuid;
		ALTER TABLE agent.provider_jobs ADD CONSTRAINT planted_fkey
			FOREIGN KEY (organization_id, planted_run) REFERENCES agent.runs (id, organization_id);
		CREATE TABLE agent.planted_nullable (id uuid NOT NULL, organization_id uuid,
			CONSTRAINT planted_to_local FOREIGN KEY (id) REFERENCES agent.planted_unlisted (id));
		CREATE TABLE agent.planted_untenanted (id uuid);
		ALTER TABLE agent.webhook_drops ADD COLUMN planted_run uuid;
		ALTER TABLE agent.webhook_drops ADD CONSTRAINT planted_local_fkey
			FOREIGN KEY (planted_run, organization_id) REFERENCES agent.runs (id, organization_id);`); err != nil {
		t.Fatal(err)
	}
	dist := append(slices.Clone(distributed), "agent.planted_nullable", "agent.planted_untenanted")
	local := maps.Clone(notDistributed)
	local["agent.planted_vanished"] = "listed, never created"
	rep, err := checkSharding(ctx, db, dist, local)
	if err != nil {
		t.Fatal(err)
	}
	// Contains, not Equal: a table a migration forgot to list is the other
	// test's failure, not this one's.
	if !slices.Contains(rep.unlisted, "agent.planted_unlisted") {
		t.Errorf("unlisted = %q, want agent.planted_unlisted", rep.unlisted)
	}
	if !slices.Contains(rep.vanished, "agent.planted_vanished") {
		t.Errorf("vanished = %q, want agent.planted_vanished", rep.vanished)
	}
	for _, want := range []string{
		"agent.saved_search_snapshots: unique constraint planted_unique",
		"agent.runs: unique index planted_unique_index",
		// The foreign key holds organization_id on both sides, but matches
		// the referencing organization_id to the referenced id.
		"agent.provider_jobs: foreign key planted_fkey",
		"agent.planted_nullable: organization_id is nullable",
		"agent.planted_nullable: foreign key planted_to_local",
		"agent.planted_untenanted: has no organization_id column",
		"agent.webhook_drops: foreign key planted_local_fkey",
	} {
		if !slices.ContainsFunc(rep.violations, func(v string) bool { return strings.HasPrefix(v, want) }) {
			t.Errorf("violations miss %q; they are %q", want, rep.violations)
		}
	}
}

// checkSharding reads the catalog of db and reports every table that is in
// neither list, every listed table that is gone, every key of a
// distributed table that does not carry organization_id, and every foreign
// key from a table that is not distributed to one that is (a local table
// cannot check a key whose rows live on the shards).
func checkSharding(ctx context.Context, db *pgxpool.Pool, distributed []string, notDistributed map[string]string) (shardingReport, error) {
	var rep shardingReport
	rows, err := db.Query(ctx, `
		SELECT n.nspname || '.' || c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
			AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
		ORDER BY 1`)
	if err != nil {
		return rep, err
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return rep, err
		}
		tables = append(tables, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return rep, err
	}
	for _, name := range tables {
		_, local := notDistributed[name]
		if !local && !slices.Contains(distributed, name) {
			rep.unlisted = append(rep.unlisted, name)
		}
	}
	for _, name := range distributed {
		if !slices.Contains(tables, name) {
			rep.vanished = append(rep.vanished, name)
		}
	}
	for name := range notDistributed {
		if !slices.Contains(tables, name) {
			rep.vanished = append(rep.vanished, name)
		}
	}
	slices.Sort(rep.vanished)

	for _, name := range distributed {
		if !slices.Contains(tables, name) {
			continue
		}
		v, err := tableViolations(ctx, db, name, distributed)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", name, err)
		}
		rep.violations = append(rep.violations, v...)
	}
	rows, err = db.Query(ctx, `
		SELECT n.nspname || '.' || c.relname, con.conname, fn.nspname || '.' || f.relname
		FROM pg_constraint con
		JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_class f ON f.oid = con.confrelid JOIN pg_namespace fn ON fn.oid = f.relnamespace
		WHERE con.contype = 'f'
		ORDER BY 1, 2`)
	if err != nil {
		return rep, err
	}
	defer rows.Close()
	for rows.Next() {
		var table, name, ref string
		if err := rows.Scan(&table, &name, &ref); err != nil {
			return rep, err
		}
		if _, local := notDistributed[table]; local && slices.Contains(distributed, ref) {
			rep.violations = append(rep.violations, fmt.Sprintf("%s: foreign key %s references the distributed table %s "+
				"from a table that is not distributed", table, name, ref))
		}
	}
	return rep, rows.Err()
}

// tableViolations checks one distributed table.
func tableViolations(ctx context.Context, db *pgxpool.Pool, table string, distributed []string) ([]string, error) {
	var out []string
	var notNull *bool
	if err := db.QueryRow(ctx, `SELECT (SELECT a.attnotnull FROM pg_attribute a
			WHERE a.attrelid = $1::regclass AND a.attname = $2 AND NOT a.attisdropped)`, table, distColumn).Scan(&notNull); err != nil {
		return nil, err
	}
	switch {
	case notNull == nil:
		return []string{fmt.Sprintf("%s: has no %s column", table, distColumn)}, nil
	case !*notNull:
		out = append(out, fmt.Sprintf("%s: %s is nullable; a distribution column must be NOT NULL", table, distColumn))
	}

	// Constraints: primary keys, unique, exclusion and foreign keys. For
	// each, the names of its columns, and for a foreign key the referenced
	// table, its columns in the same order, and whether that table is one
	// of the distributed ones.
	rows, err := db.Query(ctx, `
		SELECT con.conname, con.contype::text,
			ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, i)
				JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i),
			coalesce(fn.nspname || '.' || f.relname, ''),
			ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, i)
				JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i)
		FROM pg_constraint con
		LEFT JOIN pg_class f ON f.oid = con.confrelid
		LEFT JOIN pg_namespace fn ON fn.oid = f.relnamespace
		WHERE con.conrelid = $1::regclass AND con.contype IN ('p', 'u', 'x', 'f')
		ORDER BY con.conname`, table)
	if err != nil {
		return nil, err
	}
	kinds := map[string]string{"p": "primary key", "u": "unique constraint", "x": "exclusion constraint", "f": "foreign key"}
	for rows.Next() {
		var name, kind, refTable string
		var cols, refCols []string
		if err := rows.Scan(&name, &kind, &cols, &refTable, &refCols); err != nil {
			rows.Close()
			return nil, err
		}
		what := fmt.Sprintf("%s: %s %s (%s)", table, kinds[kind], name, strings.Join(cols, ", "))
		i := slices.Index(cols, distColumn)
		switch {
		case i < 0:
			out = append(out, what+" does not include "+distColumn)
		case kind != "f":
		case !slices.Contains(distributed, refTable):
			out = append(out, fmt.Sprintf("%s references %s, which is not distributed", what, refTable))
		case refCols[i] != distColumn:
			out = append(out, fmt.Sprintf("%s matches %s to %s.%s, not to its %s", what, distColumn, refTable, refCols[i], distColumn))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	// Unique indexes that no constraint stands behind.
	rows, err = db.Query(ctx, `
		SELECT ic.relname,
			ARRAY(SELECT coalesce(a.attname::text, '(expression)') FROM unnest(i.indkey) WITH ORDINALITY k(n, o)
				LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n ORDER BY k.o)
		FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
		WHERE i.indrelid = $1::regclass AND i.indisunique
			AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid AND con.conrelid = i.indrelid)
		ORDER BY ic.relname`, table)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		var cols []string
		if err := rows.Scan(&name, &cols); err != nil {
			rows.Close()
			return nil, err
		}
		if !slices.Contains(cols, distColumn) {
			out = append(out, fmt.Sprintf("%s: unique index %s (%s) does not include %s", table, name, strings.Join(cols, ", "), distColumn))
		}
	}
	rows.Close()
	return out, rows.Err()
}
