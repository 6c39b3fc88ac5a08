package webhooks

import "github.com/searchd/searchd/internal/shardpass"

// The SQL of endpoints and deliveries; internal/runevents inserts the
// deliveries. A clock parameter is NULL in production (now()) and a
// stubbed instant in tests.

const endpointColumns = `e.organization_id, e.id, e.url, e.description, e.event_types, e.secret, e.state,
	e.disabled_reason, e.disabled_at, e.failing_since, e.created_at, e.created_by, e.updated_at`

// endpointCreateLock serializes the endpoint creates of organization $1
// for the rest of the transaction. On a cluster it is taken on the
// coordinator, where every write of the organization's endpoints begins.
const endpointCreateLock = `SELECT pg_advisory_xact_lock(hashtextextended('searchd.webhook_endpoints:' || $1::text, 0))`

// endpointCount counts the endpoints of organization $1; it runs after
// endpointCreateLock.
const endpointCount = `SELECT count(*) FROM agent.webhook_endpoints WHERE organization_id = $1`

// endpointInsert creates an endpoint, enabled.
const endpointInsert = `
INSERT INTO agent.webhook_endpoints AS e
	(organization_id, id, url, description, event_types, secret, created_at, created_by, updated_at)
VALUES (@org::uuid, @id::uuid, @url::text, @description::text, @event_types::text[], @secret::text,
	agent.clock(@now), @actor::text, agent.clock(@now))
RETURNING ` + endpointColumns

// endpointGet reads one endpoint. $1 org, $2 id.
const endpointGet = `
SELECT ` + endpointColumns + ` FROM agent.webhook_endpoints e WHERE e.organization_id = $1 AND e.id = $2`

// endpointList reads an organization's endpoints, oldest first. $1 org,
// $2 limit.
const endpointList = `
SELECT ` + endpointColumns + ` FROM agent.webhook_endpoints e WHERE e.organization_id = $1
ORDER BY e.created_at, e.id LIMIT $2`

// endpointUpdate sets each field whose @set_* is true, and the state when
// @state is set. Enabling clears the endpoint's failure and makes its
// pending deliveries due now; disabling records @reason and parks them
// until it is enabled again.
const endpointUpdate = `
WITH c AS (SELECT agent.clock(@now) AS now), cur AS (
	SELECT e.state FROM agent.webhook_endpoints e WHERE e.organization_id = @org::uuid AND e.id = @id::uuid FOR UPDATE
), updated AS (
	UPDATE agent.webhook_endpoints AS e
	SET url = CASE WHEN @set_url::boolean THEN @url::text ELSE e.url END,
		description = CASE WHEN @set_description::boolean THEN @description::text ELSE e.description END,
		event_types = CASE WHEN @set_event_types::boolean THEN @event_types::text[] ELSE e.event_types END,
		state = coalesce(@state::text, e.state),
		disabled_reason = CASE WHEN coalesce(@state::text, e.state) = 'enabled' THEN NULL
			WHEN e.state = 'disabled' THEN e.disabled_reason ELSE @reason::text END,
		disabled_at = CASE WHEN coalesce(@state::text, e.state) = 'enabled' THEN NULL
			ELSE coalesce(e.disabled_at, c.now) END,
		failing_since = CASE WHEN @state::text = 'enabled' AND e.state = 'disabled' THEN NULL ELSE e.failing_since END,
		updated_at = c.now
	FROM c
	WHERE e.organization_id = @org::uuid AND e.id = @id::uuid
	RETURNING ` + endpointColumns + `
), resumed AS (
	UPDATE agent.webhook_deliveries AS d
	SET next_attempt_at = CASE WHEN u.state = 'enabled' THEN c.now ELSE 'infinity' END
	FROM updated u, cur, c
	WHERE d.organization_id = @org::uuid AND d.endpoint_id = @id::uuid AND d.state = 'pending'
		AND u.state <> cur.state
)
SELECT * FROM updated e`

// endpointDelete deletes an endpoint; its deliveries cascade. $1 org, $2 id.
const endpointDelete = `DELETE FROM agent.webhook_endpoints e WHERE e.organization_id = $1 AND e.id = $2`

const deliveryColumns = `d.organization_id, d.endpoint_id, d.run_id, d.seq, d.type, d.status, d.occurred_at,
	d.result_ref, d.error_code, d.error_message, d.state, d.attempts, d.next_attempt_at, d.created_at,
	d.last_attempt_at, d.delivered_at, d.last_status_code, d.last_error`

// deliveryList reads an endpoint's newest deliveries with their attempts
// as JSON. $1 org, $2 endpoint, $3 limit.
const deliveryList = `
SELECT ` + deliveryColumns + `,
	coalesce((SELECT json_agg(json_build_object('attempt', a.attempt, 'started_at', a.started_at,
		'ended_at', a.ended_at, 'outcome', a.outcome, 'status_code', a.status_code,
		'duration_ms', a.duration_us / 1000.0, 'answer', a.answer) ORDER BY a.attempt)
	FROM agent.webhook_delivery_attempts a
	WHERE a.organization_id = d.organization_id AND a.endpoint_id = d.endpoint_id AND a.run_id = d.run_id
		AND a.seq = d.seq), '[]')
FROM agent.webhook_deliveries d
WHERE d.organization_id = $1 AND d.endpoint_id = $2
ORDER BY d.created_at DESC, d.run_id DESC, d.seq DESC
LIMIT $3`

// deliveryDue finds due pending deliveries, oldest first, without a lock,
// for leaseDue to group by shard.
const deliveryDue = `
SELECT d.organization_id::text
FROM agent.webhook_deliveries d
WHERE d.state = 'pending' AND d.next_attempt_at <= agent.clock(@now)
ORDER BY d.next_attempt_at
LIMIT @limit`

var leaseDue = shardpass.New("agent.webhook_deliveries", deliveryDue)

// deliveryLease is the worker's bounded pass over one shard, as
// dispatch's dispatchLease: it leases at most @limit due deliveries of
// enabled endpoints, oldest due first, FOR UPDATE SKIP LOCKED, each one
// whose Run has no earlier event still pending for the same endpoint (so
// a Run's events reach an endpoint in order: seq n+1 waits until n is
// delivered); leasing increments attempts (the attempt's fence) and
// pushes next_attempt_at one lease ahead; it starts the attempt's row and
// prunes the attempts older than the newest @kept. It answers what the
// delivery carries and where it goes.
const deliveryLease = `
WITH due AS (
	SELECT d.organization_id, d.endpoint_id, d.run_id, d.seq
	FROM agent.webhook_deliveries d
	JOIN agent.webhook_endpoints e ON e.organization_id = d.organization_id AND e.id = d.endpoint_id
	WHERE (@all::boolean OR d.organization_id = ANY(@keys::uuid[]))
		AND (@all::boolean OR e.organization_id = ANY(@keys::uuid[]))
		AND d.state = 'pending' AND d.next_attempt_at <= @clock::timestamptz AND e.state = 'enabled'
		AND NOT EXISTS (
			SELECT FROM agent.webhook_deliveries p
			WHERE (@all::boolean OR p.organization_id = ANY(@keys::uuid[]))
				AND p.organization_id = d.organization_id AND p.run_id = d.run_id
				AND p.endpoint_id = d.endpoint_id AND p.seq < d.seq AND p.state = 'pending')
	ORDER BY d.next_attempt_at
	LIMIT @limit
	FOR UPDATE OF d SKIP LOCKED
), leased AS (
	UPDATE agent.webhook_deliveries AS d
	SET attempts = d.attempts + 1, next_attempt_at = @lease_end::timestamptz, last_attempt_at = @clock::timestamptz
	FROM due
	WHERE (@all::boolean OR d.organization_id = ANY(@keys::uuid[]))
		AND d.organization_id = due.organization_id AND d.endpoint_id = due.endpoint_id
		AND d.run_id = due.run_id AND d.seq = due.seq
	RETURNING d.*
), started AS (
	INSERT INTO agent.webhook_delivery_attempts (organization_id, endpoint_id, run_id, seq, attempt, started_at)
	SELECT l.organization_id, l.endpoint_id, l.run_id, l.seq, l.attempts, @clock::timestamptz FROM leased l
), pruned AS (
	DELETE FROM agent.webhook_delivery_attempts a
	USING leased l
	WHERE (@all::boolean OR a.organization_id = ANY(@keys::uuid[]))
		AND a.organization_id = l.organization_id AND a.endpoint_id = l.endpoint_id AND a.run_id = l.run_id
		AND a.seq = l.seq AND a.attempt <= l.attempts - @kept::integer
)
SELECT l.organization_id, l.endpoint_id, l.run_id, l.seq, l.attempts, l.type, l.status, l.occurred_at,
	l.result_ref, l.error_code, l.error_message, e.url, e.secret
FROM leased l
JOIN agent.webhook_endpoints e ON e.organization_id = l.organization_id AND e.id = l.endpoint_id
WHERE (@all::boolean OR e.organization_id = ANY(@keys::uuid[]))`

// deliveryEnd writes how an attempt ended. The delivery changes only while
// it is pending and its attempts still equal @attempt (the fence); the
// attempt's row records the answer regardless. When the fence held, a
// delivery clears the endpoint's failing_since; a failure sets it when
// clear, and disables the endpoint with @reason (parking its other pending
// deliveries) when it is at or before @disable_before. The endpoint's row
// is written only when it changes, so
// attempts on a healthy endpoint do not queue on its row lock. It answers
// whether the fence held and whether this attempt disabled the endpoint.
const deliveryEnd = `
WITH ended AS (
	UPDATE agent.webhook_deliveries AS d
	SET state = @state::text,
		next_attempt_at = coalesce(@next_attempt_at::timestamptz, d.next_attempt_at),
		delivered_at = @delivered_at::timestamptz,
		last_status_code = @status_code::integer,
		last_error = @last_error::text
	WHERE d.organization_id = @org::uuid AND d.endpoint_id = @endpoint::uuid AND d.run_id = @run::uuid
		AND d.seq = @seq::bigint AND d.attempts = @attempt::integer AND d.state = 'pending'
	RETURNING d.organization_id, d.endpoint_id
), attempt AS (
	UPDATE agent.webhook_delivery_attempts AS a
	SET ended_at = @clock::timestamptz, outcome = @outcome::text, status_code = @status_code::integer,
		duration_us = @duration_us::bigint, answer = @answer::text
	WHERE a.organization_id = @org::uuid AND a.endpoint_id = @endpoint::uuid AND a.run_id = @run::uuid
		AND a.seq = @seq::bigint AND a.attempt = @attempt::integer AND a.outcome = 'in_flight'
), endpoint AS (
	UPDATE agent.webhook_endpoints AS e
	SET failing_since = CASE WHEN @delivered::boolean THEN NULL ELSE coalesce(e.failing_since, @clock::timestamptz) END,
		state = CASE WHEN NOT @delivered::boolean AND e.failing_since <= @disable_before::timestamptz
			THEN 'disabled' ELSE e.state END,
		disabled_at = CASE WHEN NOT @delivered::boolean AND e.failing_since <= @disable_before::timestamptz
			THEN @clock::timestamptz ELSE e.disabled_at END,
		disabled_reason = CASE WHEN NOT @delivered::boolean AND e.failing_since <= @disable_before::timestamptz
			THEN @reason::text ELSE e.disabled_reason END
	FROM ended
	WHERE e.organization_id = @org::uuid AND e.id = @endpoint::uuid AND e.state = 'enabled'
		AND ended.organization_id = e.organization_id AND ended.endpoint_id = e.id
		AND ((@delivered::boolean AND e.failing_since IS NOT NULL)
			OR (NOT @delivered::boolean AND (e.failing_since IS NULL OR e.failing_since <= @disable_before::timestamptz)))
	RETURNING e.state
), parked AS (
	UPDATE agent.webhook_deliveries AS d
	SET next_attempt_at = 'infinity'
	FROM endpoint
	WHERE endpoint.state = 'disabled' AND d.organization_id = @org::uuid AND d.endpoint_id = @endpoint::uuid
		AND d.state = 'pending' AND NOT (d.run_id = @run::uuid AND d.seq = @seq::bigint)
)
SELECT EXISTS (SELECT FROM ended), EXISTS (SELECT FROM endpoint WHERE endpoint.state = 'disabled')`
