package runs

import "github.com/searchd/searchd/internal/runevents"

// The SQL of Runs, in one place. Statements that write a time take the clock
// as coalesce($now::timestamptz, now()): production passes NULL, tests a
// stubbed instant. Durations travel as microseconds.

const runColumns = runColumnsHead + `r.input` + runColumnsTail

// runColumnsHead and runColumnsTail are runColumns before and after the
// input, which the console's reads (search.go) replace: one list, so that
// a column added to a Run reaches every read of it.
const (
	runColumnsHead = `r.id, r.organization_id, r.kind, r.start_key, r.request_hash,
	r.saved_search_id, r.snapshot_id, r.name, r.status, r.options, `
	runColumnsTail = `,
	r.created_by, r.created_at, r.retain_until,
	r.version, coalesce(r.updated_at, r.created_at), r.result_ref, r.error_code, r.error_message,
	r.cancel_requested_at`
)

// runInsert admits a Run, or does nothing when its start key is taken.
// DO NOTHING rather than DO UPDATE: the duplicate takes no row lock and
// writes nothing, and the caller reads the existing Run. Its parameters are
// named (pgx.StrictNamedArgs); the retention is microseconds.
//
// dispatchInsert, the next statement of the same transaction, writes the
// Run's outbox row, its pending dispatch in agent.run_dispatches (see
// package dispatch), from the row the insert wrote: so the dispatch commits
// exactly when the Run does, in whatever transaction admits it, and a start
// key already taken inserts neither. Two statements sent in one round
// trip, not one with a data-modifying WITH: on a cluster an INSERT inside
// a WITH is planned as steps of their own through the coordinator, where
// these two are each routed to the organization's shard (the second reads
// the Run on the same shard, co-located).
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

// dispatchInsert: see runInsert. Its parameters are named: the Run's @org
// and @id.
const dispatchInsert = `
INSERT INTO agent.run_dispatches (run_id, organization_id, next_attempt_at, created_at)
SELECT r.id, r.organization_id, r.created_at, r.created_at
FROM agent.runs r
WHERE r.organization_id = @org::uuid AND r.id = @id::uuid`

// eventInsert, queued after dispatchInsert by an admission and after
// statusChangeInsert by a status report, in the same transaction, writes
// the change's webhook deliveries (internal/runevents): the Run's event
// commits exactly when its change does. Named parameters: @org and @id.
var eventInsert = runevents.Insert

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
	r.name, r.status, r.options, r.input_bytes, r.created_at, r.retain_until,
	r.version, coalesce(r.updated_at, r.created_at)`

// runListHead and runListTail are the statement of a list, newest first,
// after the position ($2 created_at, $3 id; NULLs mean before every row):
// $1 org, $4 limit. runListQuery puts a condition of runListFilter between
// them for each filter that is set, numbered $5 on.
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
	// runListKeyHead is runListHead for a list of one Idempotency-Key, $5,
	// which has at most two Runs: it reads them by the unique
	// (organization_id, start_key) index first, in a materialized CTE, and
	// the other filters and the order apply to those two. In one WHERE, a
	// generic plan (which cannot tell one status or saved search from
	// another) walked an ordered index through the organization's Runs
	// instead, filtering the key.
	runListKeyHead = `
WITH r AS MATERIALIZED (
	SELECT * FROM agent.runs r
	WHERE r.organization_id = $1
		AND r.start_key IN ('` + savedSearchPrefix + `' || $5::text, '` + directPrefix + `' || $5::text))
SELECT ` + runListColumns + `
FROM r
WHERE true`
)

// runListFilter are the conditions of a list's filters, %d their
// parameter's number. A condition is in the statement only when its filter
// is set, never "$n IS NULL OR ...": a generic plan could not use an index
// for that. The indexes that serve them, newest first:
//   - none: runs_org_created_idx;
//   - saved search: runs_org_saved_search_created_idx;
//   - status: runs_org_status_created_idx (migration 00025);
//   - an Idempotency-Key: the unique (organization_id, start_key) index,
//     which finds the at most two Runs of a key (runListKeyHead; an IN of
//     two values, not = ANY of an array, whose length a generic plan
//     does not know);
//   - created_after and created_before: a range of whichever of the first
//     three serves the rest.
var runListFilter = struct{ savedSearch, status, after, before string }{
	savedSearch: `r.saved_search_id = $%d::uuid`,
	status:      `r.status = $%d::text`,
	after:       `r.created_at > $%d::timestamptz`,
	before:      `r.created_at < $%d::timestamptz`,
}

// runStatusSet applies a runtime's status report when it moves the Run
// forward: to running from queued or dispatched, to a terminal status from
// any status that is not one. With @stopped (a cancel before dispatch,
// [Store.Cancel]) it changes the Run only when the cancel's first
// statement, runDispatchStop, stopped its dispatch in the same
// transaction; a runtime's report passes false. The subquery names the
// organization itself, not through r: a cluster routes it to the
// organization's shard only so. The condition is the transition rule itself,
// so it holds under concurrency: a concurrent report that got there first
// makes this one re-check against the row it left, and change nothing. No
// row: the report changes nothing (or the Run is not the organization's);
// runGet then says which.
//
// statusChangeInsert, the next statement of the same transaction, records
// the change in agent.run_status_changes, keyed by the version it made:
// it copies the Run as it is now, and a version that has its record
// already (the Run did not change; every change writes its record in the
// transaction that makes it, and version 1 is the admission, which has
// none) conflicts and writes nothing. Two statements, not one with a
// data-modifying WITH: a cluster plans an INSERT inside a WITH in steps
// through the coordinator, where these are each routed to the
// organization's shard. Both take named parameters.
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

// runStatusChanges reads a Run's status changes, oldest first. A Run's
// status only moves forward, so it has at most three. $1 org, $2 Run id.
const runStatusChanges = `
SELECT c.version, c.status, c.changed_at, c.reported_by, c.result_ref, c.error_code, c.error_message
FROM agent.run_status_changes c
WHERE c.run_id = $2 AND c.organization_id = $1
ORDER BY c.version`

// runDispatchStop is the first statement of a cancel ([Store.Cancel]): it
// stops the dispatch of a Run still queued, pending (due, waiting for a
// retry, or with an attempt in flight) or failed, by making it cancelled.
// Its row lock is the one the dispatcher's lease (FOR UPDATE SKIP LOCKED)
// and the end of an attempt take: a lease committed first leaves the
// dispatch pending with one more attempt, which this re-checks and stops
// (the cancel request then tells the runtime, as the attempt may reach it);
// an end that recorded a delivery first leaves it dispatched, which this
// leaves alone (the Run is the runtime's: a cancel request). Once this
// commits the dispatch is never leased, and an attempt in flight ends
// without marking the Run dispatched (its fence asks for pending).
const runDispatchStop = `
UPDATE agent.run_dispatches AS d
SET state = 'cancelled', failed_at = NULL
FROM agent.runs r
WHERE d.organization_id = @org::uuid AND d.run_id = @id::uuid
	AND r.organization_id = @org::uuid AND r.id = @id::uuid
	AND r.status = 'queued' AND d.state IN ('pending', 'failed')`

// runCancelRequest records when a cancel was first asked for: of a Run the
// runtime has (dispatched or running), or of one runStatusSet just
// cancelled before dispatch (its dispatch cancelled). Set once: a repeat,
// or a Run the runtime cancelled on its own, changes nothing.
const runCancelRequest = `
UPDATE agent.runs AS r
SET cancel_requested_at = agent.clock(@now)
WHERE r.organization_id = @org::uuid AND r.id = @id::uuid AND r.cancel_requested_at IS NULL
	AND (r.status IN ('dispatched', 'running') OR (r.status = 'cancelled' AND EXISTS (
		SELECT FROM agent.run_dispatches d
		WHERE d.organization_id = @org::uuid AND d.run_id = @id::uuid AND d.state = 'cancelled')))`

// cancelInsert writes the record of a cancel and its message to the
// runtime (agent.run_cancels, delivered by package dispatch), once per Run:
// pending, due now, for a Run the runtime has or may have (an attempt to
// deliver it was made: it may be in flight, or have reached the runtime
// without an answer); skipped for a Run cancelled before any attempt. A
// repeat conflicts and writes nothing.
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

// runVersion reads a Run's version and status: the primary-key lookup an
// event stream polls. $1 org, $2 Run id.
const runVersion = `
SELECT r.version, r.status
FROM agent.runs r
WHERE r.organization_id = $1 AND r.id = $2`

// runEvents reads a Run's events after seq $3, oldest first: its
// admission (version 1, from the Run row itself) and every status change
// (agent.run_status_changes, one row per later version, written in the
// transaction of the change), so the events need no table of their own.
// $1 org, $2 Run id, $3 the last seq the reader has (0 for all).
const runEvents = `
SELECT 1::bigint, 'queued'::text, r.created_at, NULL::text, NULL::text, NULL::text
FROM agent.runs r
WHERE r.organization_id = $1 AND r.id = $2 AND $3::bigint < 1
UNION ALL
SELECT c.version, c.status, c.changed_at, c.result_ref, c.error_code, c.error_message
FROM agent.run_status_changes c
WHERE c.run_id = $2 AND c.organization_id = $1 AND c.version > $3::bigint
ORDER BY 1`
