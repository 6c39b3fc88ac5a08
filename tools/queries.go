package tools

// callLock reads and locks the stored claim of a call, with whether its
// retention holds, so no other writer changes the answer until the
// resolution commits. A NULL $4 is the database's now().
const callLock = `
SELECT k.id, k.status, k.response, k.retain_until > c.now, c.now
FROM agent.idempotency_keys k, (SELECT coalesce($4::timestamptz, now()) AS now) c
WHERE k.organization_id = $1 AND k.scope = $2 AND k.key = $3
FOR UPDATE OF k`

// callUncertain is the condition both resolutions re-check as they write,
// a second guard beside callLock's row lock.
const callUncertain = `k.status = 'completed' AND k.response->>'outcome' = 'uncertain'`

// callMarkDelivered replaces the uncertain answer of a completed claim
// with a delivered one; the resource columns stay.
const callMarkDelivered = `
UPDATE agent.idempotency_keys AS k
SET response = $3::jsonb
WHERE k.organization_id = $1 AND k.id = $2 AND ` + callUncertain

// callAuthorizeRetry removes the uncertain answer, so the next attempt
// claims the key afresh and makes the call.
const callAuthorizeRetry = `
DELETE FROM agent.idempotency_keys AS k
WHERE k.organization_id = $1 AND k.id = $2 AND ` + callUncertain

// resolutionInsert records a resolution.
const resolutionInsert = `
INSERT INTO agent.tool_call_resolutions
	(id, organization_id, scope, key, claim_id, resolution, actor, reason,
	 uncertain_answer, resolved_at, retain_until)
VALUES (@id::uuid, @org::uuid, @scope::text, @key::text, @claim_id::uuid, @resolution::text, @actor::text,
	@reason::text, @uncertain_answer::jsonb,
	coalesce(@now::timestamptz, now()), coalesce(@now::timestamptz, now()) + @retention_us::bigint * interval '1 microsecond')
RETURNING resolved_at`
