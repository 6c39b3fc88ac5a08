package servicekeys

// Every statement names the organization (the distribution column), so
// each runs on one shard. The clock is agent.clock($now), NULL in
// production: Citus refuses now() inside a routed COALESCE or CASE.

const keyColumns = `id, organization_id, prefix, name, scopes, created_at, created_by, expires_at,
	last_used_at, revoked_at, revoked_by`

// keyInsert stores a new key. $1 organization, $2 id, $3 prefix, $4
// secret hash, $5 name, $6 scopes, $7 created by, $8 expires at (NULL:
// never), $9 now.
const keyInsert = `
INSERT INTO agent.service_keys (organization_id, id, prefix, secret_hash, name, scopes, created_at, created_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, agent.clock($9::timestamptz), $7, $8)
RETURNING ` + keyColumns

// keyList reads an organization's keys, newest first, revoked ones too.
// $1 organization, $2 limit.
const keyList = `
SELECT ` + keyColumns + `
FROM agent.service_keys
WHERE organization_id = $1
ORDER BY created_at DESC, id DESC
LIMIT $2`

// keyRevoke revokes a key and returns it, keeping a first revocation.
// $1 organization, $2 id, $3 actor, $4 now.
const keyRevoke = `
WITH revoked AS (
	UPDATE agent.service_keys
	SET revoked_at = agent.clock($4::timestamptz), revoked_by = $3
	WHERE organization_id = $1 AND id = $2 AND revoked_at IS NULL
	RETURNING ` + keyColumns + `)
SELECT ` + keyColumns + ` FROM revoked
UNION ALL
SELECT ` + keyColumns + ` FROM agent.service_keys
WHERE organization_id = $1 AND id = $2 AND NOT EXISTS (SELECT FROM revoked)`

// keyByPrefix reads a live key with its secret's hash. $1 organization,
// $2 prefix, $3 now.
const keyByPrefix = `
SELECT secret_hash, ` + keyColumns + `
FROM agent.service_keys
WHERE organization_id = $1 AND prefix = $2 AND revoked_at IS NULL
	AND (expires_at IS NULL OR expires_at > agent.clock($3::timestamptz))`

// keyTouch records a key's use at most once per interval across replicas.
// $1 organization, $2 id, $3 interval µs, $4 now.
const keyTouch = `
UPDATE agent.service_keys
SET last_used_at = agent.clock($4::timestamptz)
WHERE organization_id = $1 AND id = $2
	AND (last_used_at IS NULL OR last_used_at <= agent.clock($4::timestamptz) - $3::bigint * interval '1 microsecond')`
