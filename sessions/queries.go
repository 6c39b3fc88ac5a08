package sessions

// The clock is coalesce($now::timestamptz, now()): production passes NULL.

const sessionColumns = `id, organization_id, actor, role, via, created_at, expires_at`

// sessionInsert stores a session created now, expiring $6 µs later or at
// $7 when that is sooner (a pasted token's exp). $1 id, $2 secret hash,
// $3 organization (NULL for none), $4 actor, $5 role, $6 lifetime µs,
// $7 not after (NULL for no bound), $8 via, $9 now.
const sessionInsert = `
WITH c AS (SELECT coalesce($9::timestamptz, now()) AS now)
INSERT INTO agent.console_sessions (id, secret_hash, organization_id, actor, role, via, created_at, expires_at)
SELECT $1, $2, $3, $4, $5, $8, c.now,
	least(c.now + $6::bigint * interval '1 microsecond', coalesce($7::timestamptz, 'infinity'))
FROM c
RETURNING ` + sessionColumns

// sessionByHash reads the session of a secret, unless it has expired.
// $1 secret hash, $2 now.
const sessionByHash = `
SELECT ` + sessionColumns + `
FROM agent.console_sessions
WHERE secret_hash = $1 AND expires_at > coalesce($2::timestamptz, now())`

// sessionDelete ends the session of a secret. $1 secret hash.
const sessionDelete = `
DELETE FROM agent.console_sessions WHERE secret_hash = $1`
