package dispatch

import (
	"github.com/searchd/searchd/internal/runevents"
	"github.com/searchd/searchd/internal/shardpass"
)

// The outbox's SQL; runs.runInsert inserts its rows. A clock parameter is
// NULL in production (now()) and a stubbed instant in tests.

// dispatchDue finds due pending dispatches, oldest first, without a lock,
// for leaseDue to group by shard.
const dispatchDue = `
SELECT d.organization_id::text
FROM agent.run_dispatches d
WHERE d.state = 'pending' AND d.next_attempt_at <= agent.clock(@now)
ORDER BY d.next_attempt_at
LIMIT @limit`

// dispatchLease is the bounded pass of the dispatcher over one shard
// (@keys, the organizations the due read found there; every one with
// @all): it leases at most @limit pending dispatches that are due by
// @clock, oldest due first, and starts an attempt for each. FOR UPDATE
// SKIP LOCKED: a pass never waits on a row another replica is leasing or
// ending, and replicas lease disjoint batches. Leasing increments attempts
// (the new number is the attempt's fence) and pushes next_attempt_at one
// lease ahead (@lease_end), so the row is due again only if this attempt
// never ends. The attempt's row is inserted in_flight, and attempts older
// than the newest @kept are pruned, so a dispatch keeps a bounded history
// however long its runtime fails. Every statement names the shard's
// organizations, so a cluster runs each part of it on that one shard
// group; the clock is a parameter (the pass's [shardpass.Clock]): a cluster
// refuses now() in a COALESCE of a data-modifying statement.
const dispatchLease = `
WITH due AS (
	SELECT d.run_id, d.organization_id
	FROM agent.run_dispatches d
	WHERE (@all::boolean OR d.organization_id = ANY(@keys::uuid[]))
		AND d.state = 'pending' AND d.next_attempt_at <= @clock::timestamptz
	ORDER BY d.next_attempt_at
	LIMIT @limit
	FOR UPDATE SKIP LOCKED
), leased AS (
	UPDATE agent.run_dispatches AS d
	SET attempts = d.attempts + 1, next_attempt_at = @lease_end::timestamptz, last_attempt_at = @clock::timestamptz
	FROM due
	WHERE (@all::boolean OR d.organization_id = ANY(@keys::uuid[]))
		AND d.run_id = due.run_id AND d.organization_id = due.organization_id
	RETURNING d.run_id, d.organization_id, d.attempts
), started AS (
	INSERT INTO agent.run_dispatch_attempts (run_id, organization_id, attempt, started_at)
	SELECT l.run_id, l.organization_id, l.attempts, @clock::timestamptz
	FROM leased l
), pruned AS (
	DELETE FROM agent.run_dispatch_attempts a
	USING leased l
	WHERE (@all::boolean OR a.organization_id = ANY(@keys::uuid[]))
		AND a.run_id = l.run_id AND a.organization_id = l.organization_id AND a.attempt <= l.attempts - @kept::integer
)
SELECT l.organization_id, l.run_id, l.attempts, false FROM leased l`

// leaseDue is the lease pass's read of what is due, grouped by shard.
var leaseDue = shardpass.New("agent.run_dispatches", dispatchDue)

// dispatchMessage reads a delivery's Run and snapshot (NULLs for a direct
// Run). $1 org, $2 Run.
const dispatchMessage = `
SELECT r.id, r.organization_id, r.kind, r.name, r.saved_search_id, r.snapshot_id, r.options, r.input,
	r.created_by, r.created_at, r.start_key,
	sn.saved_search_version, sn.brief, sn.baseline, sn.content_hash, sn.created_by, sn.created_at
FROM agent.runs r
LEFT JOIN agent.saved_search_snapshots sn ON sn.organization_id = r.organization_id AND sn.id = r.snapshot_id
WHERE r.organization_id = $1 AND r.id = $2`

// dispatchEnd writes how an attempt ended and answers whether the fence
// held: the dispatch changes only while pending with attempts = @attempt;
// the attempt's row records the answer regardless. A delivery marks a
// queued Run dispatched, with its status history and webhook deliveries.
// Times are parameters: a cluster refuses now() in a CASE or COALESCE of a
// data-modifying statement.
var dispatchEnd = `
WITH ended AS (
	UPDATE agent.run_dispatches AS d
	SET state = @state::text,
		next_attempt_at = coalesce(@next_attempt_at::timestamptz, d.next_attempt_at),
		dispatched_at = @dispatched_at::timestamptz,
		failed_at = @failed_at::timestamptz,
		last_status_code = @status_code::integer,
		last_error = @last_error::text
	WHERE d.run_id = @run::uuid AND d.organization_id = @org::uuid
		AND d.attempts = @attempt::integer AND d.state = 'pending'
	RETURNING d.run_id, d.organization_id, d.state
), attempt AS (
	UPDATE agent.run_dispatch_attempts AS a
	SET ended_at = @clock::timestamptz, outcome = @outcome::text, status_code = @status_code::integer,
		answer = @answer::text
	WHERE a.run_id = @run::uuid AND a.organization_id = @org::uuid AND a.attempt = @attempt::integer
		AND a.outcome = 'in_flight'
), marked AS (
	UPDATE agent.runs AS r
	SET status = 'dispatched', version = r.version + 1, updated_at = @clock::timestamptz
	FROM ended e
	WHERE e.state = 'dispatched' AND r.organization_id = @org::uuid
		AND r.id = e.run_id AND r.organization_id = e.organization_id AND r.status = 'queued'
	RETURNING r.id, r.organization_id, r.version, r.updated_at
), history AS (
	INSERT INTO agent.run_status_changes (run_id, organization_id, version, status, changed_at)
	SELECT m.id, m.organization_id, m.version, 'dispatched', m.updated_at FROM marked m
), events AS (` + runevents.InsertFrom(`(SELECT m.id, m.organization_id, m.version, 'dispatched'::text AS status,
	m.updated_at AS changed_at, NULL::text AS result_ref, NULL::text AS error_code, NULL::text AS error_message
	FROM marked m) r`) + `
)
SELECT EXISTS (SELECT FROM ended)`

const dispatchColumns = `d.run_id, d.organization_id, d.state, d.attempts, d.next_attempt_at, d.created_at,
	d.last_attempt_at, d.dispatched_at, d.failed_at, d.last_status_code, d.last_error, d.retries`

// dispatchGet reads a Run's dispatch. $1 org, $2 Run.
const dispatchGet = `
SELECT ` + dispatchColumns + `
FROM agent.run_dispatches d
WHERE d.run_id = $2 AND d.organization_id = $1`

// dispatchAttempts reads a dispatch's kept attempts, oldest first. $1 org,
// $2 Run.
const dispatchAttempts = `
SELECT a.attempt, a.started_at, a.ended_at, a.outcome, a.status_code, a.answer
FROM agent.run_dispatch_attempts a
WHERE a.run_id = $2 AND a.organization_id = $1
ORDER BY a.attempt`

// dispatchRetries reads a dispatch's retries, oldest first. $1 org, $2 Run,
// $3 limit.
const dispatchRetries = `
SELECT t.actor, t.reason, t.retried_at, t.previous_status_code, t.previous_error
FROM agent.run_dispatch_retries t
WHERE t.run_id = $2 AND t.organization_id = $1
ORDER BY t.retried_at, t.id
LIMIT $3`

// dispatchListFailed reads failed dispatches, newest failure first; of
// one organization when $1 is set. $2 limit.
const dispatchListFailed = `
SELECT ` + dispatchColumns + `
FROM agent.run_dispatches d
WHERE d.state = 'failed' AND ($1::uuid IS NULL OR d.organization_id = $1)
ORDER BY d.failed_at DESC
LIMIT $2`

// dispatchListPending reads pending dispatches, first due first; of one
// organization when $1 is set. $2 limit.
const dispatchListPending = `
SELECT ` + dispatchColumns + `
FROM agent.run_dispatches d
WHERE d.state = 'pending' AND ($1::uuid IS NULL OR d.organization_id = $1)
ORDER BY d.next_attempt_at
LIMIT $2`

// dispatchRetry makes a failed dispatch due now and records the retry; it
// leaves any other dispatch alone. @org may be NULL.
const dispatchRetry = `
WITH c AS (
	SELECT coalesce(@now::timestamptz, now()) AS now
), retried AS (
	UPDATE agent.run_dispatches AS d
	SET state = 'pending', failed_at = NULL, next_attempt_at = c.now, retries = d.retries + 1
	FROM c
	WHERE d.run_id = @run::uuid AND (@org::uuid IS NULL OR d.organization_id = @org::uuid) AND d.state = 'failed'
	RETURNING d.run_id, d.organization_id, d.last_status_code, d.last_error
), recorded AS (
	INSERT INTO agent.run_dispatch_retries
		(id, run_id, organization_id, actor, reason, retried_at, previous_status_code, previous_error)
	SELECT @id::uuid, r.run_id, r.organization_id, @actor::text, @reason::text, c.now, r.last_status_code, r.last_error
	FROM retried r, c
)
SELECT r.organization_id FROM retried r`

// dispatchFind reads a dispatch by Run id $1, of organization $2 if set.
const dispatchFind = `
SELECT ` + dispatchColumns + `
FROM agent.run_dispatches d
WHERE d.run_id = $1 AND ($2::uuid IS NULL OR d.organization_id = $2)`

// dispatchPendingStats counts the pending dispatches and the age of the
// oldest, in one index-only scan. $1 now.
const dispatchPendingStats = `
SELECT count(*), coalesce(extract(epoch FROM coalesce($1::timestamptz, now()) - min(d.created_at)), 0)::float8
FROM agent.run_dispatches d
WHERE d.state = 'pending'`

// dispatchFailedCount counts the failed dispatches.
const dispatchFailedCount = `
SELECT count(*) FROM agent.run_dispatches d WHERE d.state = 'failed'`

// cancelDue is dispatchDue for cancel requests.
const cancelDue = `
SELECT c.organization_id::text
FROM agent.run_cancels c
WHERE c.state = 'pending' AND c.next_attempt_at <= agent.clock(@now)
ORDER BY c.next_attempt_at
LIMIT @limit`

// leaseCancelsDue is leaseDue for cancel requests.
var leaseCancelsDue = shardpass.New("agent.run_cancels", cancelDue)

// cancelLease is dispatchLease for cancel requests, without an attempts
// table: the request's row keeps its last answer.
const cancelLease = `
WITH due AS (
	SELECT c.run_id, c.organization_id
	FROM agent.run_cancels c
	WHERE (@all::boolean OR c.organization_id = ANY(@keys::uuid[]))
		AND c.state = 'pending' AND c.next_attempt_at <= @clock::timestamptz
	ORDER BY c.next_attempt_at
	LIMIT @limit
	FOR UPDATE SKIP LOCKED
)
UPDATE agent.run_cancels AS c
SET attempts = c.attempts + 1, next_attempt_at = @lease_end::timestamptz, last_attempt_at = @clock::timestamptz
FROM due
WHERE (@all::boolean OR c.organization_id = ANY(@keys::uuid[]))
	AND c.run_id = due.run_id AND c.organization_id = due.organization_id
RETURNING c.organization_id, c.run_id, c.attempts, true`

// cancelMessage reads what a cancel request carries. $1 org, $2 Run.
const cancelMessage = `
SELECT c.requested_at, c.reason
FROM agent.run_cancels c
WHERE c.organization_id = $1 AND c.run_id = $2`

// cancelEnd is dispatchEnd for cancel requests: fenced the same way, it
// answers whether the fence held.
const cancelEnd = `
WITH ended AS (
	UPDATE agent.run_cancels AS c
	SET state = @state::text,
		next_attempt_at = coalesce(@next_attempt_at::timestamptz, c.next_attempt_at),
		delivered_at = @dispatched_at::timestamptz,
		failed_at = @failed_at::timestamptz,
		last_status_code = @status_code::integer,
		last_error = @last_error::text
	WHERE c.run_id = @run::uuid AND c.organization_id = @org::uuid
		AND c.attempts = @attempt::integer AND c.state = 'pending'
	RETURNING c.run_id
)
SELECT EXISTS (SELECT FROM ended)`

// cancelGet reads a Run's cancel request. $1 org, $2 Run.
const cancelGet = `
SELECT c.requested_at, c.requested_by, c.reason, c.state, c.attempts, c.delivered_at, c.failed_at,
	c.last_status_code, c.last_error
FROM agent.run_cancels c
WHERE c.organization_id = $1 AND c.run_id = $2`
