package main

// The SQL of the scale benchmark (scale.go): the seed that copies the rows
// of a few real starts N times, and the figures read around the load.
//
// Every seed statement copies template rows (scaleTemplate: the rows of
// the real starts, numbered n = 0..T-1) for the starts g of one slice
// [@from, @to], start g copying template row g % T. Start g is stamped
// @t0 + g × @step, so the seeded starts are spread evenly over the span
// before the load. Its keys are recomputed from g in every statement by
// pg_temp.scale_id, so the snapshot, the Run, its dispatch and its claim
// of one start name each other without a table of the ids:
// time-ordered (version 7: the start's millisecond, then random bits) when
// @v7, random (version 4) otherwise; the random bits are an md5 of the
// kind and g, as random as gen_random_uuid() and repeatable.
//
// Even starts are the large organization's (@org, spread over its saved
// searches @searches); odd starts are one of @small small organizations',
// each with one saved search copied from the large organization's first.

// scaleIDFunction is the key of the row of kind k of start g made at ts:
// one expression, so that the planner inlines it.
const scaleIDFunction = `
CREATE FUNCTION pg_temp.scale_id(k text, g bigint, ts timestamptz, v7 boolean) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
	SELECT (CASE WHEN v7
		THEN lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7' || substr(md5(k || g), 1, 3)
			|| '8' || substr(md5(k || g), 4, 15)
		ELSE substr(md5(k || g), 1, 12) || '4' || substr(md5(k || g), 13, 3) || '8' || substr(md5(k || g), 16, 15) END)::uuid
$$`

// scaleSmallOrgExpr is the organization of odd start g, one of @small.
const scaleSmallOrgExpr = `md5('org' || ((g / 2) % @small::bigint))::uuid`

// scaleTemplate numbers the rows of the real starts of @org: each Run with
// its snapshot, dispatch and completed claim.
const scaleTemplate = `
CREATE TEMP TABLE scale_template AS
SELECT (row_number() OVER (ORDER BY r.created_at, r.id) - 1)::bigint AS n,
	r.kind, r.start_key, r.request_hash, r.name, r.options, r.created_by,
	s.saved_search_version, s.saved_search_name, s.brief, s.baseline, s.content_hash, s.origin,
	c.scope, c.request_hash AS claim_hash, c.resource_type, c.response
FROM agent.runs r
JOIN agent.saved_search_snapshots s ON s.organization_id = r.organization_id AND s.id = r.snapshot_id
JOIN agent.idempotency_keys c ON c.organization_id = r.organization_id AND c.resource_id = s.id::text
WHERE r.organization_id = @org::uuid`

// scaleSmallSearches copies the large organization's first saved search
// (and its baseline) into each of the @small organizations.
const scaleSmallSearches = `
WITH src AS (
	SELECT ss.*, b.items, b.cursor FROM agent.saved_searches ss JOIN agent.saved_search_baselines b ON b.saved_search_id = ss.id
	WHERE ss.organization_id = @org::uuid ORDER BY ss.created_at, ss.id LIMIT 1),
ins AS (
	INSERT INTO agent.saved_searches (id, organization_id, name, brief, version, created_by, created_at, updated_at)
	SELECT pg_temp.scale_id('ss', m, @t0::timestamptz, @v7::boolean), md5('org' || m)::uuid, src.name, src.brief,
		src.version, src.created_by, @t0::timestamptz, @t0::timestamptz
	FROM generate_series(0, @small::bigint - 1) m, src
	RETURNING id, organization_id)
INSERT INTO agent.saved_search_baselines (saved_search_id, organization_id, items, cursor, updated_at)
SELECT ins.id, ins.organization_id, src.items, src.cursor, @t0::timestamptz FROM ins, src`

// scaleStarts is the FROM clause every seed statement shares: the starts
// of the slice with their template row, time, organization and saved
// search.
const scaleStarts = `
FROM (SELECT g, @t0::timestamptz + g * @step::interval AS ts,
		CASE WHEN g % 2 = 0 THEN @org::uuid ELSE ` + scaleSmallOrgExpr + ` END AS org,
		CASE WHEN g % 2 = 0 THEN (@searches::uuid[])[1 + (g / 2) % cardinality(@searches::uuid[])]
			ELSE pg_temp.scale_id('ss', (g / 2) % @small::bigint, @t0::timestamptz, @v7::boolean) END AS search
	FROM generate_series(@from::bigint, @to::bigint) g) st
JOIN scale_template t ON t.n = st.g % @templates::bigint`

// scaleSnapshots copies the snapshots, each naming its start's claim.
const scaleSnapshots = `
INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
	saved_search_name, brief, baseline, content_hash, created_by, created_at, origin, claim_id)
SELECT pg_temp.scale_id('s', g, ts, @v7::boolean), org, search, t.saved_search_version,
	t.saved_search_name, t.brief, t.baseline, t.content_hash, t.created_by, ts, t.origin,
	pg_temp.scale_id('c', g, ts, @v7::boolean)` + scaleStarts

// scaleRuns copies the Runs; a seeded Run has run its course (succeeded,
// with a result reference), and the first @due are past retention, for
// the sweep pass.
const scaleRuns = `
INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, saved_search_id, snapshot_id,
	name, status, options, created_by, created_at, retain_until, version, updated_at, result_ref)
SELECT pg_temp.scale_id('r', g, ts, @v7::boolean), org, t.kind, t.start_key || '-' || g, t.request_hash, search,
	pg_temp.scale_id('s', g, ts, @v7::boolean), t.name, 'succeeded', t.options, t.created_by, ts,
	CASE WHEN g < @due::bigint THEN now() - interval '1 hour' ELSE ts + interval '396 days' END,
	3, ts + interval '1 minute', 'results/' || pg_temp.scale_id('r', g, ts, @v7::boolean)` + scaleStarts

// scaleDispatches copies the Runs' dispatches, delivered a second after
// their admission.
const scaleDispatches = `
INSERT INTO agent.run_dispatches (run_id, organization_id, state, attempts, next_attempt_at, created_at,
	last_attempt_at, dispatched_at, last_status_code)
SELECT pg_temp.scale_id('r', g, ts, @v7::boolean), org, 'dispatched', 1, ts, ts,
	ts + interval '1 second', ts + interval '1 second', 202` + scaleStarts

// scaleClaims copies the completed claims, under a fresh random key as a
// client mints (client.NewIdempotencyKey). Every one is kept live (its
// retention ends within the next day) but the first @due, which are due:
// the worst case of a claims table, all N starts within one retention.
const scaleClaims = `
INSERT INTO agent.idempotency_keys (id, organization_id, scope, key, request_hash, status, lease_token,
	resource_type, resource_id, response, claimed_at, lease_expires_at, retain_until)
SELECT pg_temp.scale_id('c', g, ts, @v7::boolean), org, t.scope, md5('key' || g)::uuid::text, t.claim_hash,
	'completed', md5('lease' || g)::uuid, t.resource_type, pg_temp.scale_id('s', g, ts, @v7::boolean)::text,
	t.response, ts, ts + interval '30 seconds',
	CASE WHEN g < @due::bigint THEN ts + interval '30 seconds' ELSE now() + (g::float8 / @to::bigint) * interval '1 day' END` + scaleStarts

// scaleTables are the tables a start writes, whose sizes are the bytes
// stored per start.
var scaleTables = []string{"agent.idempotency_keys", "agent.saved_search_snapshots", "agent.runs", "agent.run_dispatches"}

// scaleSizes is the size of each of scaleTables (heap, TOAST and indexes)
// and of their indexes alone.
const scaleSizes = `
SELECT t, pg_total_relation_size(t::regclass), pg_indexes_size(t::regclass)
FROM unnest(@tables::text[]) t`

// scaleWAL is the WAL written so far, in bytes since the cluster began.
const scaleWAL = `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`

// scaleSettings are the server's settings the run depends on.
const scaleSettings = `
SELECT string_agg(s || '=' || current_setting(s), ' ' ORDER BY i)
FROM unnest(ARRAY['fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'max_wal_size',
	'checkpoint_timeout', 'wal_keep_size', 'effective_cache_size', 'maintenance_work_mem', 'autovacuum', 'max_connections']) WITH ORDINALITY AS t(s, i)`

// scaleFPIs is the full-page images written between @from and @to into
// the relations of this database, by relation (a record's images are
// counted on its first block's relation), largest first: pg_walinspect.
const scaleFPIs = `
SELECT coalesce(c.relname, 'relfilenode ' || w.node) AS relation, sum(w.fpi_length)::bigint AS bytes
FROM (SELECT (regexp_match(block_ref, 'rel \d+/(\d+)/(\d+)'))[1]::oid AS db,
		(regexp_match(block_ref, 'rel \d+/(\d+)/(\d+)'))[2]::oid AS node, fpi_length
	FROM pg_get_wal_records_info(@from::pg_lsn, @to::pg_lsn) WHERE fpi_length > 0) w
LEFT JOIN pg_class c ON c.relfilenode = w.node
WHERE w.db = (SELECT oid FROM pg_database WHERE datname = current_database())
GROUP BY 1 ORDER BY 2 DESC LIMIT 8`

// scaleLSN is the WAL position now.
const scaleLSN = `SELECT pg_current_wal_lsn()::text`
