package operator

// The clock is coalesce($now::timestamptz, now()): production passes NULL.

const claimColumns = `k.id, k.organization_id, k.scope, k.key, k.request_hash, k.status,
	k.lease_token, k.resource_type, k.resource_id, k.response,
	k.claimed_at, k.lease_expires_at, k.retain_until`

// claimGetByID reads one claim of any organization. $1 id, $2 now.
const claimGetByID = `
SELECT ` + claimColumns + `, coalesce($2::timestamptz, now())
FROM agent.idempotency_keys k
WHERE k.id = $1`

// claimOverview counts claims in one scan by scope, status and hour slot
// (width_bucket from the chart's first hour: 0 before it, $2 for the
// current hour), with expired and live counts per group; the caller
// derives the states. FILTER counts and width_bucket are cheaper per row
// than CASE and epoch arithmetic; OFFSET 0 keeps the clock subquery from
// being evaluated per row. $1 now, $2 hours.
const claimOverview = `
SELECT k.scope, k.status, width_bucket(k.claimed_at, c.bounds) AS slot, c.since,
	count(*) FILTER (WHERE k.retain_until <= c.now) AS expired,
	count(*) FILTER (WHERE k.retain_until > c.now AND k.lease_expires_at > c.now) AS live,
	count(*) AS total
FROM agent.idempotency_keys k,
	(SELECT t.now, t.since,
		array(SELECT t.since + g * interval '1 hour' FROM generate_series(0, $2::int - 1) g) AS bounds
	 FROM (SELECT n.now, date_trunc('hour', n.now) - ($2::int - 1) * interval '1 hour' AS since
	       FROM (SELECT coalesce($1::timestamptz, now()) AS now) n) t
	 OFFSET 0) c
GROUP BY 1, 2, 3, 4`

// eventHourly buckets the drops by the hour they were received and their
// reason, and the force-releases by the hour they were made, over the
// last $2 hours (by their received_at and released_at indexes). $1 now.
const eventHourly = `
WITH c AS (SELECT coalesce($1::timestamptz, now()) AS now),
w AS (SELECT date_trunc('hour', c.now) - ($2::int - 1) * interval '1 hour' AS since FROM c)
SELECT 'drop' AS kind, date_trunc('hour', d.received_at) AS hour, d.reason AS what, count(*)
FROM agent.webhook_drops d, w
WHERE d.received_at >= w.since
GROUP BY 1, 2, 3
UNION ALL
SELECT 'release', date_trunc('hour', r.released_at), 'released', count(*)
FROM agent.claim_releases r, w
WHERE r.released_at >= w.since
GROUP BY 1, 2, 3`

// claimProcessingSelect and claimProcessingAfter wrap the WHERE of the
// two processing-claim pages: after ($2 lease_expires_at, $3 id), matching
// $5 organization and $6 scope (NULL for any). $1 now, $4 limit.
const (
	claimProcessingSelect = `
SELECT ` + claimColumns + `, c.now
FROM agent.idempotency_keys k, (SELECT coalesce($1::timestamptz, now()) AS now) c
WHERE `
	claimProcessingAfter = `
	AND ($5::uuid IS NULL OR k.organization_id = $5::uuid)
	AND ($6::text IS NULL OR k.scope = $6::text)
	AND (k.lease_expires_at, k.id) > (coalesce($2::timestamptz, '-infinity'),
		coalesce($3::uuid, '00000000-0000-0000-0000-000000000000'))
ORDER BY k.lease_expires_at, k.id
LIMIT $4`
)

// claimStuckPage reads processing claims whose lease has passed and whose
// retention holds, the longest stuck first.
const claimStuckPage = claimProcessingSelect + `k.lease_expires_at <= c.now
	AND k.status = 'processing' AND k.retain_until > c.now` + claimProcessingAfter

// claimInFlightPage reads processing claims with a live lease, the soonest
// to pass first.
const claimInFlightPage = claimProcessingSelect + `k.lease_expires_at > c.now
	AND k.status = 'processing'` + claimProcessingAfter

// claimByKey reads the one claim of a key, by the unique index, with the
// database clock. $1 org, $2 scope, $3 key, $4 now.
const claimByKey = `
SELECT ` + claimColumns + `, coalesce($4::timestamptz, now())
FROM agent.idempotency_keys k
WHERE k.organization_id = $1 AND k.scope = $2 AND k.key = $3`

// releaseInsert records a force-release. Its parameters are named (pgx.StrictNamedArgs).
const releaseInsert = `
INSERT INTO agent.claim_releases
	(id, claim_id, organization_id, scope, key, request_hash, claimed_at,
	 lease_expires_at, lease_live, actor, reason, via, released_at)
VALUES (@id, @claim_id, @org, @scope, @key, @request_hash, @claimed_at,
	@lease_expires_at, @lease_live, @actor, @reason, @via, coalesce(@now::timestamptz, now()))
RETURNING released_at`

// releaseColumns are the columns of agent.claim_releases as r.
const releaseColumns = `r.id, r.claim_id, r.organization_id, r.scope, r.key, r.request_hash,
	r.claimed_at, r.lease_expires_at, r.lease_live, r.actor, r.reason, r.via, r.released_at`

// releasePage reads force-releases newest first after ($1 released_at,
// $2 id). $3 limit, $4 organization, $5 actor, $6 claim: NULL for any.
const releasePage = `
SELECT ` + releaseColumns + `
FROM agent.claim_releases r
WHERE ($4::uuid IS NULL OR r.organization_id = $4::uuid)
	AND ($5::text IS NULL OR r.actor = $5::text)
	AND ($6::uuid IS NULL OR r.claim_id = $6::uuid)
	AND (r.released_at, r.id) < (coalesce($1::timestamptz, 'infinity'),
		coalesce($2::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY r.released_at DESC, r.id DESC
LIMIT $3`

// releasePrune deletes at most 100 force-release records older than
// ReleaseRetention. $1 retention µs, $2 now.
const releasePrune = `
DELETE FROM agent.claim_releases
WHERE id IN (
	SELECT id FROM agent.claim_releases
	WHERE released_at < coalesce($2::timestamptz, now()) - $1::bigint * interval '1 microsecond'
	ORDER BY released_at
	LIMIT 100)`
