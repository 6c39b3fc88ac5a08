package migrations_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/testkit/pgtest"
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
	"agent.provider_inbox",
	"agent.provider_inbox_copies",
	"agent.provider_jobs",
	"agent.run_cancels",
	"agent.run_dispatch_attempts",
	"agent.run_dispatch_retries",
	"agent.run_dispatches",
	"agent.run_status_changes",
	"agent.runs",
	"agent.saved_search_baselines",
	"agent.saved_search_schedules",
	"agent.saved_search_snapshots",
	"agent.saved_searches",
	"agent.schedule_occurrences",
	"agent.service_keys",
	"agent.tool_call_resolutions",
	"agent.webhook_deliveries",
	"agent.webhook_delivery_attempts",
	"agent.webhook_endpoints",
}

// reference are the reference tables, a copy on every node, each with the
// reason: small, read on the request path without an organization, and
// written rarely (a write writes every copy). Their keys need no
// organization (each copy holds every row); they reference no other table,
// and a local table may not reference them.
var reference = map[string]string{
	"agent.provider_job_directory": "the callback directory: a callback names no organization, only searchd's " +
		"job id in its path, which it finds its job and tenant by, on the coordinator's own copy, whichever worker " +
		"is down; one entry per job, keyed by the job's id; a registration, rare, writes every copy",
}

// notDistributed are the tables that are not sharded by organization, each
// with the reason. A table that is in neither list fails the test: whoever
// adds one decides which it is.
var notDistributed = map[string]string{
	"agent.webhook_drops": "the drop audit: an unknown_job drop names no organization (organization_id is NULL), " +
		"so the row has no shard to go to; append-only and off the claim path, it stays a local table on the coordinator",
	"agent.claim_releases": "the operator's audit of force-releases: rare, append-only and read across " +
		"organizations by the console's release log, off the claim path; a local table on the coordinator",
	"agent.sweeper_runs": "the sweeper's run log: one row per run over every organization, naming none; " +
		"a local table on the coordinator",
	"agent.console_sessions": "the console's sessions: a session is found by the secret in its cookie alone, before " +
		"anyone knows whose it is, and an operator's session names no organization (organization_id NULL), so it has " +
		"no shard; not a reference table either, which would write every node at each sign-in and sign-out and refuse " +
		"them while a worker is down; rare (a sign-in, then a read per console page), off the claim path and joined " +
		"with no other table, it stays a local table on the coordinator, which every replica reaches",
	"agent.cursor_key": "the key that signs list cursors (00022): one row, naming no organization, read once by " +
		"each replica at startup; a local table on the coordinator, which every replica reaches",
	"public.goose_db_version": "the migration bookkeeping of goose: one row per applied migration, " +
		"read and written by `searchd migrate` alone; it stays on the coordinator, which applies DDL to every shard",
}

// layout is what the lists above say of every table.
type layout struct {
	distributed    []string
	reference      map[string]string
	notDistributed map[string]string
}

// listed is the layout of the lists above.
var listed = layout{distributed: distributed, reference: reference, notDistributed: notDistributed}

// shardingReport is what checkSharding found.
type shardingReport struct {
	unlisted   []string // tables in neither list
	vanished   []string // listed tables that do not exist
	violations []string // keys of distributed tables without organization_id, and the like
}

// TestShardingKeysCarryOrganization asserts, from pg_catalog, that the
// schema can be distributed by organization_id: every table is listed as
// distributed, reference or local (these two with a reason), and every
// key of a distributed table includes organization_id. A migration that
// adds a table, or a key that would not hold per shard, fails here.
func TestShardingKeysCarryOrganization(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	rep, err := checkSharding(t.Context(), db, listed)
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
// The mistakes are planted with plain DDL, which Citus refuses on
// distributed tables, so it runs on PostgreSQL alone.
func TestShardingCheckCatchesPlantedViolations(t *testing.T) {
	t.Parallel()
	if pgtest.Citus() {
		t.Skip("plants keys Citus refuses on distributed tables; the check itself runs on PostgreSQL")
	}
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
			FOREIGN KEY (planted_run, organization_id) REFERENCES agent.runs (id, organization_id);
		ALTER TABLE agent.provider_job_directory ADD CONSTRAINT planted_directory_fkey
			FOREIGN KEY (job_id, organization_id) REFERENCES agent.provider_jobs (id, organization_id);
		ALTER TABLE agent.claim_releases ADD CONSTRAINT planted_to_reference_fkey
			FOREIGN KEY (claim_id) REFERENCES agent.provider_job_directory (job_id);`); err != nil {
		t.Fatal(err)
	}
	plan := layout{
		distributed:    append(slices.Clone(distributed), "agent.planted_nullable", "agent.planted_untenanted"),
		reference:      reference,
		notDistributed: maps.Clone(notDistributed),
	}
	plan.notDistributed["agent.planted_vanished"] = "listed, never created"
	rep, err := checkSharding(ctx, db, plan)
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
		"agent.provider_job_directory: foreign key planted_directory_fkey",
		"agent.claim_releases: foreign key planted_to_reference_fkey",
	} {
		if !slices.ContainsFunc(rep.violations, func(v string) bool { return strings.HasPrefix(v, want) }) {
			t.Errorf("violations miss %q; they are %q", want, rep.violations)
		}
	}
}

// TestDistributionIsAsListed asserts what the database did with the
// lists: on plain PostgreSQL no table is distributed; on Citus (make
// test-citus) every table of distributed is hash-distributed by
// organization_id in the co-location group of agent.idempotency_keys,
// every table of reference is a reference table, and every other table is
// local. Migration 00019 distributes them; a migration that adds a tenant
// table without distributing it fails here on Citus.
func TestDistributionIsAsListed(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := t.Context()
	type placement struct {
		method, column string
		group          int64
	}
	got := map[string]placement{}
	var citus bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL`).Scan(&citus); err != nil {
		t.Fatal(err)
	}
	if citus {
		rows, err := db.Query(ctx, `
			SELECT logicalrelid::regclass::text, partmethod::text,
				coalesce(column_to_column_name(logicalrelid, partkey), ''), colocationid
			FROM pg_dist_partition`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name string
			var p placement
			if err := rows.Scan(&name, &p.method, &p.column, &p.group); err != nil {
				t.Fatal(err)
			}
			got[name] = p
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if citus != pgtest.Citus() {
		t.Fatalf("the database has Citus: %v; the harness started Citus: %v", citus, pgtest.Citus())
	}
	// Every listed table, asked through the function the background
	// passes ask (internal/shardpass): hash-distributed or not.
	for _, name := range slices.Concat(distributed, slices.Collect(maps.Keys(reference)), slices.Collect(maps.Keys(notDistributed))) {
		var is bool
		if err := db.QueryRow(ctx, `SELECT agent.is_distributed($1::regclass)`, name).Scan(&is); err != nil {
			t.Fatalf("agent.is_distributed(%s): %v", name, err)
		}
		if want := got[name].method == "h"; is != want {
			t.Errorf("agent.is_distributed(%s) = %v, want %v", name, is, want)
		}
	}
	if !citus {
		return
	}
	anchor, ok := got["agent.idempotency_keys"]
	if !ok {
		t.Fatalf("agent.idempotency_keys is not distributed; Citus tables: %v", got)
	}
	for _, name := range distributed {
		p, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s is not distributed on Citus: add SELECT agent.distribute_tenant_table('%s') to its migration", name, name)
		case p.method != "h" || p.column != distColumn || p.group != anchor.group:
			t.Errorf("%s is distributed by %q (method %s) in co-location group %d, want hash by %s in group %d (agent.idempotency_keys')",
				name, p.column, p.method, p.group, distColumn, anchor.group)
		}
	}
	for name := range reference {
		if p, ok := got[name]; !ok || p.method != "n" {
			t.Errorf("%s is %+v on Citus, want a reference table: SELECT agent.distribute_reference_table('%s')", name, p, name)
		}
	}
	for name := range notDistributed {
		if _, ok := got[name]; ok {
			t.Errorf("%s is a Citus table, but the lists keep it local: %s", name, notDistributed[name])
		}
	}
}

// checkSharding reads the catalog of db and reports every table that is in
// no list, every listed table that is gone, every key of a distributed
// table that does not carry organization_id, every foreign key from a
// local table to a Citus one (a local table cannot check a key whose rows
// live on other nodes), and every foreign key of a reference table.
func checkSharding(ctx context.Context, db *pgxpool.Pool, plan layout) (shardingReport, error) {
	var rep shardingReport
	rows, err := db.Query(ctx, `
		SELECT n.nspname || '.' || c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
			AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
			AND n.nspname NOT IN ('citus', 'citus_internal', 'columnar', 'columnar_internal')
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
		_, local := plan.notDistributed[name]
		_, ref := plan.reference[name]
		if !local && !ref && !slices.Contains(plan.distributed, name) {
			rep.unlisted = append(rep.unlisted, name)
		}
	}
	for _, name := range slices.Concat(plan.distributed, slices.Collect(maps.Keys(plan.reference)),
		slices.Collect(maps.Keys(plan.notDistributed))) {
		if !slices.Contains(tables, name) {
			rep.vanished = append(rep.vanished, name)
		}
	}
	slices.Sort(rep.vanished)

	for _, name := range plan.distributed {
		if !slices.Contains(tables, name) {
			continue
		}
		v, err := tableViolations(ctx, db, name, distColumn, plan.distributed)
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
		_, refIsReference := plan.reference[ref]
		if _, local := plan.notDistributed[table]; local && (slices.Contains(plan.distributed, ref) || refIsReference) {
			rep.violations = append(rep.violations, fmt.Sprintf("%s: foreign key %s references the Citus table %s "+
				"from a table that stays local", table, name, ref))
		}
		if _, fromReference := plan.reference[table]; fromReference {
			rep.violations = append(rep.violations, fmt.Sprintf("%s: foreign key %s: a reference table references "+
				"no other table (%s)", table, name, ref))
		}
	}
	return rep, rows.Err()
}

// tableViolations checks one table distributed by distColumn, whose
// foreign keys may reference the tables of group alone.
func tableViolations(ctx context.Context, db *pgxpool.Pool, table, distColumn string, group []string) ([]string, error) {
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
		case !slices.Contains(group, refTable):
			out = append(out, fmt.Sprintf("%s references %s, which is not distributed with it", what, refTable))
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
