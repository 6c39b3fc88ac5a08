package runs

// The SQL of Runs, in one place. Statements that write a time take the clock
// as coalesce($now::timestamptz, now()): production passes NULL, tests a
// stubbed instant. Durations travel as microseconds.

const runColumns = `r.id, r.organization_id, r.kind, r.start_key, r.request_hash,
	r.saved_search_id, r.snapshot_id, r.name, r.status, r.options, r.input,
	r.created_by, r.created_at, r.retain_until`

// runInsert admits a Run, or does nothing when its start key is taken.
// DO NOTHING rather than DO UPDATE: the duplicate takes no row lock and
// writes nothing, and the caller reads the existing Run. Its parameters are
// named (pgx.StrictNamedArgs); the retention is microseconds.
const runInsert = `
INSERT INTO agent.runs AS r
	(id, organization_id, kind, start_key, request_hash, saved_search_id, snapshot_id,
	 name, status, options, input, created_by, created_at, retain_until)
VALUES (@id::uuid, @org::uuid, @kind::text, @start_key::text, @request_hash::text,
	@saved_search_id::uuid, @snapshot_id::uuid, @name::text, 'queued', @options::jsonb,
	@input::jsonb, @created_by::text, coalesce(@now::timestamptz, now()),
	coalesce(@now::timestamptz, now()) + @retention_us::bigint * interval '1 microsecond')
ON CONFLICT (organization_id, start_key) DO NOTHING
RETURNING ` + runColumns

// runGetByStartKey reads the Run admitted under a start key while its
// retention holds. A Run past retain_until answers nothing, as the plane
// treats a claim past its retention: whether its key still replays must not
// depend on when the sweeper last ran. $1 org, $2 start_key, $3 now.
const runGetByStartKey = `
SELECT ` + runColumns + `
FROM agent.runs r
WHERE r.organization_id = $1 AND r.start_key = $2
	AND r.retain_until > coalesce($3::timestamptz, now())`

// runWithSnapshotByStartKey reads the Run admitted under a start key with
// the summary of its snapshot (NULLs for a direct Run): the whole answer of
// a replayed start, in one statement. Like runGetByStartKey it answers
// nothing for a Run past its retention. $1 org, $2 start_key, $3 now.
const runWithSnapshotByStartKey = `
SELECT ` + runColumns + `,
	sn.id, sn.saved_search_id, sn.saved_search_version, sn.content_hash, sn.created_at
FROM agent.runs r
LEFT JOIN agent.saved_search_snapshots sn
	ON sn.organization_id = r.organization_id AND sn.id = r.snapshot_id
WHERE r.organization_id = $1 AND r.start_key = $2
	AND r.retain_until > coalesce($3::timestamptz, now())`

// runDeleteExpiredByStartKey deletes the Run under a start key once its
// retention has passed, as the sweeper would, so that a new start with the
// key is admitted instead of meeting a Run nothing replays any more. The
// condition is re-checked under the row lock; a Run still retained is never
// deleted. $1 org, $2 start_key, $3 now.
const runDeleteExpiredByStartKey = `
DELETE FROM agent.runs r
WHERE r.organization_id = $1 AND r.start_key = $2
	AND r.retain_until <= agent.clock($3)`

// runGet reads one Run. $1 org, $2 id.
const runGet = `
SELECT ` + runColumns + `
FROM agent.runs r
WHERE r.organization_id = $1 AND r.id = $2`

// runListColumns are what a list reads of a Run: all but the input, whose
// stored size stands in for it, and the columns that are not in its JSON.
const runListColumns = `r.id, r.organization_id, r.kind, r.saved_search_id, r.snapshot_id,
	r.name, r.status, r.options, r.input_bytes, r.created_at, r.retain_until`

// runList reads a page of an organization's Runs, newest first, after the
// position ($2 created_at, $3 id); NULLs mean before every row. $1 org,
// $4 limit.
const runList = `
SELECT ` + runListColumns + `
FROM agent.runs r
WHERE r.organization_id = $1
	AND (r.created_at, r.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY r.created_at DESC, r.id DESC
LIMIT $4`

// runListBySavedSearch is runList for the Runs of one saved search, $5.
// A statement of its own rather than an optional filter, so its plan uses
// the (organization_id, saved_search_id, created_at) index.
const runListBySavedSearch = `
SELECT ` + runListColumns + `
FROM agent.runs r
WHERE r.organization_id = $1 AND r.saved_search_id = $5
	AND (r.created_at, r.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY r.created_at DESC, r.id DESC
LIMIT $4`
