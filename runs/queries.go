package runs

import "github.com/searchd/searchd/internal/runevents"

// Times are coalesce($now::timestamptz, now()), NULL in production.
// Durations are microseconds.

const runColumns = runColumnsHead + `r.input` + runColumnsTail

// runColumnsHead and runColumnsTail surround the input column, which the
// console's reads replace.
const (
	runColumnsHead = `r.id, r.organization_id, r.kind, r.start_key, r.request_hash,
	r.saved_search_id, r.snapshot_id, r.name, r.status, r.options, `
	runColumnsTail = `,
	r.created_by, r.created_at, r.retain_until,
	r.version, coalesce(r.updated_at, r.created_at), r.result_ref, r.error_code, r.error_message,
	r.cancel_requested_at`
)

// runInsert admits a Run, or does nothing (no row lock) when its start key is
// taken. dispatchInsert follows in the same transaction: two statements
// rather than a data-modifying WITH, which Citus would route through the
// coordinator. Named parameters.
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

// dispatchInsert: see runInsert. Named parameters @org and @id.
const dispatchInsert = `
INSERT INTO agent.run_dispatches (run_id, organization_id, next_attempt_at, created_at)
SELECT r.id, r.organization_id, r.created_at, r.created_at
FROM agent.runs r
WHERE r.organization_id = @org::uuid AND r.id = @id::uuid`

// eventInsert writes a change's webhook deliveries in its transaction.
var eventInsert = runevents.Insert

// runGetByStartKey reads the Run under a start key while retained, so replay
// does not depend on the sweeper. $1 org, $2 start_key, $3 now.
const runGetByStartKey = `
SELECT ` + runColumns + `
FROM agent.runs r
WHERE r.organization_id = $1 AND r.start_key = $2
	AND r.retain_until > coalesce($3::timestamptz, now())`

// runWithSnapshotByStartKey is runGetByStartKey with the snapshot summary
// (NULLs for a direct Run).
const runWithSnapshotByStartKey = `
SELECT ` + runColumns + `,
	sn.id, sn.saved_search_id, sn.saved_search_version, sn.content_hash, sn.created_at
FROM agent.runs r
LEFT JOIN agent.saved_search_snapshots sn
	ON sn.organization_id = r.organization_id AND sn.id = r.snapshot_id
WHERE r.organization_id = $1 AND r.start_key = $2
	AND r.retain_until > coalesce($3::timestamptz, now())`

// runDeleteExpiredByStartKey deletes the Run under a start key past its
// retention, rechecked under the row lock. $1 org, $2 start_key, $3 now.
const runDeleteExpiredByStartKey = `
DELETE FROM agent.runs r
WHERE r.organization_id = $1 AND r.start_key = $2
	AND r.retain_until <= agent.clock($3)`

// runGet reads one Run. $1 org, $2 id.
const runGet = `
SELECT ` + runColumns + `
FROM agent.runs r
WHERE r.organization_id = $1 AND r.id = $2`

// runListColumns: the input's size stands in for the input.
const runListColumns = `r.id, r.organization_id, r.kind, r.saved_search_id, r.snapshot_id,
	r.name, r.status, r.options, r.input_bytes, r.created_at, r.retain_until,
	r.version, coalesce(r.updated_at, r.created_at)`

// runListHead and runListTail form a list, newest first, after ($2
// created_at, $3 id; NULLs for the start), $1 org, $4 limit, with
// runListFilter conditions between them from $5.
const (
	runListHead = `
SELECT ` + runListColumns + `
FROM agent.runs r
WHERE r.organization_id = $1`
	runListTail = `
	AND (r.created_at, r.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY r.created_at DESC, r.id DESC
LIMIT $4`
	// runListKeyHead reads a key's (at most two) Runs by the start_key
	// index in a materialized CTE; otherwise a generic plan walks the
	// organization's Runs.
	runListKeyHead = `
WITH r AS MATERIALIZED (
	SELECT * FROM agent.runs r
	WHERE r.organization_id = $1
		AND r.start_key IN ('` + savedSearchPrefix + `' || $5::text, '` + directPrefix + `' || $5::text))
SELECT ` + runListColumns + `
FROM r
WHERE true`
)

// runListFilter are the filter conditions, %d the parameter number. Only set
// filters are included (never "$n IS NULL OR ..."), so a generic plan can
// use the matching index.
var runListFilter = struct{ savedSearch, status, after, before string }{
	savedSearch: `r.saved_search_id = $%d::uuid`,
	status:      `r.status = $%d::text`,
	after:       `r.created_at > $%d::timestamptz`,
	before:      `r.created_at < $%d::timestamptz`,
}

// runStatusSet moves the Run forward: to running from queued or dispatched,
// to a terminal status from any other; with @stopped only if runDispatchStop
// stopped the dispatch in this transaction. The WHERE is the transition
// rule, so a concurrent report rechecks against the winner's row; no row
// means nothing changed. statusChangeInsert follows, keyed by version (a
// conflict writes nothing); two statements for Citus routing. Named parameters.
const runStatusSet = `
UPDATE agent.runs AS r
SET status = @status::text, version = r.version + 1, updated_at = agent.clock(@now),
	result_ref = @result_ref::text, error_code = @error_code::text, error_message = @error_message::text
WHERE r.organization_id = @org::uuid AND r.id = @id::uuid
	AND (r.status IN ('queued', 'dispatched') OR (r.status = 'running' AND @status::text <> 'running'))
	AND (NOT @stopped::boolean OR EXISTS (
		SELECT FROM agent.run_dispatches d
		WHERE d.organization_id = @org::uuid AND d.run_id = @id::uuid AND d.state = 'cancelled'))
RETURNING ` + runColumns

const statusChangeInsert = `
INSERT INTO agent.run_status_changes
	(run_id, organization_id, version, status, changed_at, reported_by, result_ref, error_code, error_message)
SELECT r.id, r.organization_id, r.version, r.status, r.updated_at, @reported_by::text,
	r.result_ref, r.error_code, r.error_message
FROM agent.runs r
WHERE r.organization_id = @org::uuid AND r.id = @id::uuid AND r.version > 1
ON CONFLICT DO NOTHING`

// runStatusChanges reads a Run's status changes, oldest first. $1 org, $2 Run id.
const runStatusChanges = `
SELECT c.version, c.status, c.changed_at, c.reported_by, c.result_ref, c.error_code, c.error_message
FROM agent.run_status_changes c
WHERE c.run_id = $2 AND c.organization_id = $1
ORDER BY c.version`

// runDispatchStop cancels the dispatch of a Run still queued. It takes the
// row lock the dispatcher's lease takes, so a committed lease is rechecked
// and stopped, a recorded delivery left alone (the cancel goes to the
// runtime), and after commit no attempt can mark the Run dispatched.
const runDispatchStop = `
UPDATE agent.run_dispatches AS d
SET state = 'cancelled', failed_at = NULL
FROM agent.runs r
WHERE d.organization_id = @org::uuid AND d.run_id = @id::uuid
	AND r.organization_id = @org::uuid AND r.id = @id::uuid
	AND r.status = 'queued' AND d.state IN ('pending', 'failed')`

// runCancelRequest records the first cancel request; repeats change nothing.
const runCancelRequest = `
UPDATE agent.runs AS r
SET cancel_requested_at = agent.clock(@now)
WHERE r.organization_id = @org::uuid AND r.id = @id::uuid AND r.cancel_requested_at IS NULL
	AND (r.status IN ('dispatched', 'running') OR (r.status = 'cancelled' AND EXISTS (
		SELECT FROM agent.run_dispatches d
		WHERE d.organization_id = @org::uuid AND d.run_id = @id::uuid AND d.state = 'cancelled')))`

// cancelInsert writes the cancel for the runtime once per Run, for a Run the
// runtime has or may have.
const cancelInsert = `
INSERT INTO agent.run_cancels
	(run_id, organization_id, requested_at, requested_by, reason, state, next_attempt_at)
SELECT r.id, r.organization_id, r.cancel_requested_at, @requested_by::text, @reason::text,
	CASE WHEN r.status <> 'cancelled' OR coalesce(d.attempts, 1) > 0 THEN 'pending' ELSE 'skipped' END,
	r.cancel_requested_at
FROM agent.runs r
LEFT JOIN agent.run_dispatches d ON d.organization_id = r.organization_id AND d.run_id = r.id
WHERE r.organization_id = @org::uuid AND r.id = @id::uuid AND r.cancel_requested_at IS NOT NULL
ON CONFLICT DO NOTHING`

// runVersion reads a Run's version and status. $1 org, $2 Run id.
const runVersion = `
SELECT r.version, r.status
FROM agent.runs r
WHERE r.organization_id = $1 AND r.id = $2`

// runEvents reads a Run's events after seq $3, oldest first: the admission
// and each status change. $1 org, $2 Run id.
const runEvents = `
SELECT 1::bigint, 'queued'::text, r.created_at, NULL::text, NULL::text, NULL::text
FROM agent.runs r
WHERE r.organization_id = $1 AND r.id = $2 AND $3::bigint < 1
UNION ALL
SELECT c.version, c.status, c.changed_at, c.result_ref, c.error_code, c.error_message
FROM agent.run_status_changes c
WHERE c.run_id = $2 AND c.organization_id = $1 AND c.version > $3::bigint
ORDER BY 1`
