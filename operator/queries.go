package operator

// The SQL of the operator's views, in one place. The clock is
// coalesce($now::timestamptz, now()): production passes NULL.

const claimColumns = `k.id, k.organization_id, k.scope, k.key, k.request_hash, k.status,
	k.lease_token, k.resource_type, k.resource_id, k.response,
	k.claimed_at, k.lease_expires_at, k.retain_until`

// claimGetByID reads one claim of any organization. $1 id, $2 now.
const claimGetByID = `
SELECT ` + claimColumns + `, coalesce($2::timestamptz, now())
FROM agent.idempotency_keys k
WHERE k.id = $1`

// claimCounts counts the claims by scope and state: completed, processing
// with a live lease, processing with a passed lease (stuck). Rows past
// their retention answer nothing and are counted apart. $1 now.
const claimCounts = `
SELECT k.scope,
	count(*) FILTER (WHERE k.status = 'completed' AND k.retain_until > c.now),
	count(*) FILTER (WHERE k.status = 'processing' AND k.lease_expires_at > c.now),
	count(*) FILTER (WHERE k.status = 'processing' AND k.lease_expires_at <= c.now AND k.retain_until > c.now),
	count(*) FILTER (WHERE k.retain_until <= c.now)
FROM agent.idempotency_keys k, (SELECT coalesce($1::timestamptz, now()) AS now) c
GROUP BY k.scope
ORDER BY k.scope`

// claimProcessingPage reads processing claims, soonest lease end first,
// after the position ($2 lease_expires_at, $3 id). $1 now, $4 limit,
// $5 true for live leases (in flight) or false for passed ones (stuck),
// $6 organization, $7 scope, $8 key: NULL for any.
const claimProcessingPage = `
SELECT ` + claimColumns + `, c.now
FROM agent.idempotency_keys k, (SELECT coalesce($1::timestamptz, now()) AS now) c
WHERE k.status = 'processing'
	AND (k.lease_expires_at > c.now) = $5::boolean
	AND ($5::boolean OR k.retain_until > c.now)
	AND ($6::uuid IS NULL OR k.organization_id = $6::uuid)
	AND ($7::text IS NULL OR k.scope = $7::text)
	AND ($8::text IS NULL OR k.key = $8::text)
	AND (k.lease_expires_at, k.id) > (coalesce($2::timestamptz, '-infinity'),
		coalesce($3::uuid, '00000000-0000-0000-0000-000000000000'))
ORDER BY k.lease_expires_at, k.id
LIMIT $4`

// claimHourly buckets the claims of the last $2 hours by the hour they
// were (last) claimed and their state now, and the drops by the hour they
// were received and their reason. $1 now, $2 hours.
const claimHourly = `
WITH c AS (SELECT coalesce($1::timestamptz, now()) AS now),
w AS (SELECT date_trunc('hour', c.now) - ($2::int - 1) * interval '1 hour' AS since FROM c)
SELECT 'claim' AS kind, date_trunc('hour', k.claimed_at) AS hour,
	CASE WHEN k.status = 'completed' THEN 'completed'
		WHEN k.lease_expires_at > c.now THEN 'in_flight'
		ELSE 'stuck' END AS what,
	count(*)
FROM agent.idempotency_keys k, c, w
WHERE k.claimed_at >= w.since
GROUP BY 1, 2, 3
UNION ALL
SELECT 'drop', date_trunc('hour', d.received_at), d.reason, count(*)
FROM agent.webhook_drops d, w
WHERE d.received_at >= w.since
GROUP BY 1, 2, 3
UNION ALL
SELECT 'release', date_trunc('hour', r.released_at), 'released', count(*)
FROM agent.claim_releases r, w
WHERE r.released_at >= w.since
GROUP BY 1, 2, 3`

// releaseInsert records a force-release. $1 id, $2 claim_id, $3 org,
// $4 scope, $5 key, $6 request_hash, $7 claimed_at, $8 lease_expires_at,
// $9 lease_live, $10 actor, $11 reason, $12 via, $13 now.
const releaseInsert = `
INSERT INTO agent.claim_releases
	(id, claim_id, organization_id, scope, key, request_hash, claimed_at,
	 lease_expires_at, lease_live, actor, reason, via, released_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, coalesce($13::timestamptz, now()))
RETURNING released_at`

// releaseColumns are the columns of agent.claim_releases as r.
const releaseColumns = `r.id, r.claim_id, r.organization_id, r.scope, r.key, r.request_hash,
	r.claimed_at, r.lease_expires_at, r.lease_live, r.actor, r.reason, r.via, r.released_at`

// releasePage reads force-releases newest first after ($1 released_at,
// $2 id). $3 limit, $4 organization, $5 actor: NULL for any.
const releasePage = `
SELECT ` + releaseColumns + `
FROM agent.claim_releases r
WHERE ($4::uuid IS NULL OR r.organization_id = $4::uuid)
	AND ($5::text IS NULL OR r.actor = $5::text)
	AND (r.released_at, r.id) < (coalesce($1::timestamptz, 'infinity'),
		coalesce($2::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY r.released_at DESC, r.id DESC
LIMIT $3`

// releasePrune deletes at most 100 force-release records older than
// ReleaseRetention, so the audit is bounded without a sweeper pass of its
// own. $1 retention µs, $2 now.
const releasePrune = `
DELETE FROM agent.claim_releases
WHERE id IN (
	SELECT id FROM agent.claim_releases
	WHERE released_at < coalesce($2::timestamptz, now()) - $1::bigint * interval '1 microsecond'
	ORDER BY released_at
	LIMIT 100)`
