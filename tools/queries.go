package tools

// The SQL of resolving uncertain calls, in one place: the journal itself is
// the plane's (agent.idempotency_keys), and only a person's resolution of an
// uncertain answer writes it from here. Each statement takes the clock as
// coalesce($now::timestamptz, now()): production passes NULL, tests a
// stubbed instant.

// callLock reads and locks the stored claim of a call, with whether its
// retention holds by the database clock, so the resolution that follows sees
// the answer no other writer can change until commit. $1 org, $2 scope,
// $3 key, $4 now.
const callLock = `
SELECT k.id, k.status, k.response, k.retain_until > c.now, c.now
FROM agent.idempotency_keys k, (SELECT coalesce($4::timestamptz, now()) AS now) c
WHERE k.organization_id = $1 AND k.scope = $2 AND k.key = $3
FOR UPDATE OF k`

// callUncertain is the condition both resolutions re-check as they write:
// the claim is completed with an uncertain answer. Under callLock's row lock
// it holds; it is also what keeps a second resolver from writing should the
// lock ever be dropped.
const callUncertain = `k.status = 'completed' AND k.response->>'outcome' = 'uncertain'`

// callMarkDelivered replaces the uncertain answer of a completed claim with
// the person's: delivered. The resource columns stay. $1 org, $2 id,
// $3 response.
const callMarkDelivered = `
UPDATE agent.idempotency_keys AS k
SET response = $3::jsonb
WHERE k.organization_id = $1 AND k.id = $2 AND ` + callUncertain

// callAuthorizeRetry removes the uncertain answer from the journal, so the
// next attempt of the call claims its key afresh and makes the call.
// $1 org, $2 id.
const callAuthorizeRetry = `
DELETE FROM agent.idempotency_keys AS k
WHERE k.organization_id = $1 AND k.id = $2 AND ` + callUncertain

// resolutionInsert records a resolution. Its parameters are named (pgx.StrictNamedArgs); the retention is
// microseconds.
const resolutionInsert = `
INSERT INTO agent.tool_call_resolutions
	(id, organization_id, scope, key, claim_id, resolution, actor, reason,
	 uncertain_answer, resolved_at, retain_until)
VALUES (@id::uuid, @org::uuid, @scope::text, @key::text, @claim_id::uuid, @resolution::text, @actor::text,
	@reason::text, @uncertain_answer::jsonb,
	coalesce(@now::timestamptz, now()), coalesce(@now::timestamptz, now()) + @retention_us::bigint * interval '1 microsecond')
RETURNING resolved_at`
