package idempotency

// The clock is coalesce($now::timestamptz, now()) (NULL in production);
// durations are microseconds. Statements that judge the clock return
// recordColumns plus the instant used as now. Every statement names the
// organization (the Citus distribution column); INSERT ... SELECT parameters
// are typed because Citus plans the SELECT before it sees them.

const recordColumns = `k.id, k.organization_id, k.scope, k.key, k.request_hash, k.status,
	k.lease_token, k.resource_type, k.resource_id, k.response,
	k.claimed_at, k.lease_expires_at, k.retain_until, k.waited`

// claimInsert inserts a processing claim, or nothing when the key exists.
// DO NOTHING takes no row lock, so a replay stays read-only; VALUES keeps it
// a Citus router insert.
const claimInsert = `
INSERT INTO agent.idempotency_keys AS k
	(id, organization_id, scope, key, request_hash, status, lease_token,
	 claimed_at, lease_expires_at, retain_until)
VALUES (@id::uuid, @org::uuid, @scope::text, @key::text, @request_hash::text, 'processing', @lease_token::uuid,
	coalesce(@now::timestamptz, now()),
	coalesce(@now::timestamptz, now()) + @lease_us::bigint * interval '1 microsecond',
	coalesce(@now::timestamptz, now()) + greatest(@lease_us::bigint, @retention_us::bigint) * interval '1 microsecond')
ON CONFLICT (organization_id, scope, key) DO NOTHING
RETURNING ` + recordColumns + `, k.claimed_at`

// claimReclaim moves a passed lease to a new worker. The WHERE repeats every
// reclaim condition, so of two racing reclaims one updates nothing.
// agent.clock(@now) is inline: Citus evaluates it once on the coordinator and
// refuses STABLE functions applied to columns.
const claimReclaim = `
UPDATE agent.idempotency_keys AS k
SET lease_token = @lease_token,
	claimed_at = agent.clock(@now),
	lease_expires_at = agent.clock(@now) + @lease_us::bigint * interval '1 microsecond',
	retain_until = greatest(k.retain_until,
		agent.clock(@now) + greatest(@lease_us::bigint, @retention_us::bigint) * interval '1 microsecond')
WHERE k.organization_id = @org AND k.scope = @scope AND k.key = @key
	AND k.request_hash = @request_hash
	AND k.status = 'processing'
	AND k.lease_expires_at <= agent.clock(@now)
	AND k.retain_until > agent.clock(@now)
RETURNING ` + recordColumns + `, k.claimed_at`

// claimReplaceExpired replaces a row past its retention as if absent, so
// behaviour does not depend on the sweeper; the new id keeps anything
// addressed to the old claim away. Parameters as claimInsert.
const claimReplaceExpired = `
UPDATE agent.idempotency_keys AS k
SET id = @id, request_hash = @request_hash, status = 'processing', lease_token = @lease_token,
	resource_type = NULL, resource_id = NULL, response = NULL,
	claimed_at = agent.clock(@now),
	lease_expires_at = agent.clock(@now) + @lease_us::bigint * interval '1 microsecond',
	retain_until = agent.clock(@now) + greatest(@lease_us::bigint, @retention_us::bigint) * interval '1 microsecond'
WHERE k.organization_id = @org AND k.scope = @scope AND k.key = @key
	AND k.retain_until <= agent.clock(@now)
RETURNING ` + recordColumns + `, k.claimed_at`

// claimGet reads one claim. $1 org, $2 scope, $3 key, $4 now.
const claimGet = `
SELECT ` + recordColumns + `, coalesce($4::timestamptz, now())
FROM agent.idempotency_keys k
WHERE k.organization_id = $1 AND k.scope = $2 AND k.key = $3`

// claimComplete ends a processing claim, fenced by the lease token. No clock
// in RETURNING: Citus refuses it.
const claimComplete = `
UPDATE agent.idempotency_keys AS k
SET status = 'completed', resource_type = @resource_type, resource_id = @resource_id, response = @response
WHERE k.organization_id = @org AND k.id = @id AND k.lease_token = @lease_token AND k.status = 'processing'
RETURNING ` + recordColumns

// claimRelease deletes an unfinished claim, fenced by the lease token, and
// returns whether a waiter marked it. $1 org, $2 id, $3 lease_token.
const claimRelease = `
DELETE FROM agent.idempotency_keys AS k
WHERE k.organization_id = $1 AND k.id = $2 AND k.lease_token = $3 AND k.status = 'processing'
RETURNING k.scope, k.key, k.waited`

// claimEnded notifies a claim's waiters; on Citus it runs on the coordinator,
// where the hubs listen. $1 channel, $2 payload.
const claimEnded = `SELECT pg_notify($1, $2)`

// claimCompleteOrAbort is claimComplete for a pipelined completion: a lost
// fence raises SD409, aborting the transaction before its COMMIT. It returns
// whether a waiter marked the claim. $1 org, $2 id, $3 lease_token,
// $4 resource_type, $5 resource_id, $6 response.
const claimCompleteOrAbort = `
WITH done AS (
	UPDATE agent.idempotency_keys AS k
	SET status = 'completed', resource_type = $4, resource_id = $5, response = $6
	WHERE k.organization_id = $1 AND k.id = $2 AND k.lease_token = $3 AND k.status = 'processing'
	RETURNING k.waited)
SELECT CASE WHEN EXISTS (SELECT FROM done) THEN (SELECT d.waited FROM done d)
	ELSE agent.idempotency_fence_lost($2::uuid) END`

// claimMarkWaited marks a processing claim as waited for, so only waited
// claims pay for NOTIFY's commit lock; after completion (ordered by the row
// lock) it updates nothing. $1 org, $2 scope, $3 key.
const claimMarkWaited = `
UPDATE agent.idempotency_keys AS k SET waited = true
WHERE k.organization_id = $1 AND k.scope = $2 AND k.key = $3 AND k.status = 'processing'`
