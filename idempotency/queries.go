package idempotency

// The SQL of the plane, in one place. Every statement takes the clock as
// coalesce($now::timestamptz, now()), so production uses the database clock
// and tests pass a stubbed instant. Durations travel as microseconds.
// Statements with many parameters name them (@name, with a
// pgx.StrictNamedArgs that must supply exactly those names); pgx rewrites
// them to $1, $2... on the client, always to the same text, so the
// statement is still prepared once per connection and costs no extra round
// trip.
//
// Each statement that judges the clock returns recordColumns followed by the
// instant it used as now, so the service decides "lease passed" and
// "retention passed" by the same clock that wrote the row.
//
// Every statement names the claim's organization, the distribution column
// on a cluster sharded by organization (docs/scaling.md): each is routed to
// the one shard that holds the claim. Every parameter of an INSERT ...
// SELECT is typed: a cluster plans its SELECT before the parameters are
// sent.

const recordColumns = `k.id, k.organization_id, k.scope, k.key, k.request_hash, k.status,
	k.lease_token, k.resource_type, k.resource_id, k.response,
	k.claimed_at, k.lease_expires_at, k.retain_until, k.waited`

// claimInsert inserts a new processing claim, or nothing when the key exists.
// DO NOTHING, not DO UPDATE: a conflicting insert then takes no row lock and
// writes nothing, so a replay stays a read-only transaction. VALUES, not a
// SELECT: on a cluster it is a router insert to the claim's shard (Citus
// would pull an INSERT ... SELECT through the coordinator). Within one
// statement now() does not move, so claimed_at is the instant it judged
// by, and is returned as such. The lease and the retention are
// microseconds.
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

// claimReclaim moves a passed lease to a new worker. It is conditional on
// everything that makes the row reclaimable (processing, lease passed, same
// request hash, retention holding), so of two racing reclaims the second
// re-checks the row the first wrote, finds a live lease and updates nothing.
// The retention never shrinks: greatest() keeps the longer of the two.
// The lease and the retention are microseconds. The clock is
// agent.clock(@now) written out where it is used, never joined in as a
// column: Citus evaluates the call once, on the coordinator, before it
// routes the statement, and refuses a STABLE function (timestamptz
// arithmetic is one) applied to a column, or now() in a COALESCE. Within a
// statement now() does not move, so claimed_at is the instant it judged
// by, and is returned as such.
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

// claimReplaceExpired takes over a row whose retention has passed, as if the
// key were absent: the sweeper has not run yet, and behaviour must not depend
// on when it last did. The row gets a new id, so nothing addressed to the old
// claim can reach the new one. Its clock is written as claimReclaim's.
// It takes the parameters of claimInsert.
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

// claimComplete ends a claim with its answer, fenced by the lease token. A
// completed claim is terminal: the status condition makes a second completion
// a no-op. A completion judges no clock, and returns none (Citus refuses a
// clock in RETURNING).
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

// claimEnded tells the waiters of a claim that it ended: NOTIFY on
// NotifyChannel with the claim's payload. The plane sends it on the
// connection that ended the claim, inside its transaction when there is
// one (delivered at its commit), else right after: on a cluster it runs on
// the coordinator, where every replica's hub listens, whichever worker
// holds the claim. $1 channel, $2 payload.
const claimEnded = `SELECT pg_notify($1, $2)`

// claimCompleteOrAbort is claimComplete for a completion pipelined with the
// caller's other writes and its COMMIT in one round trip: when the fence has
// moved on (no row updated) it calls agent.idempotency_fence_lost, which
// raises SQLSTATE SD409 and so aborts the transaction before its COMMIT
// runs. CASE evaluates the call only when the update found nothing, and a
// data-modifying WITH runs to completion whether or not it is read. It
// returns whether a waiter marked the claim. On a cluster the whole
// statement runs on the claim's worker, where migration 00019 created the
// function. $1 org, $2 id, $3 lease_token, $4 resource_type,
// $5 resource_id, $6 response.
const claimCompleteOrAbort = `
WITH done AS (
	UPDATE agent.idempotency_keys AS k
	SET status = 'completed', resource_type = $4, resource_id = $5, response = $6
	WHERE k.organization_id = $1 AND k.id = $2 AND k.lease_token = $3 AND k.status = 'processing'
	RETURNING k.waited)
SELECT CASE WHEN EXISTS (SELECT FROM done) THEN (SELECT d.waited FROM done d)
	ELSE agent.idempotency_fence_lost($2::uuid) END`

// claimMarkWaited marks a processing claim as waited for, so that its end
// notifies (migration 00012): a completion whose claim nobody marked sends
// no NOTIFY, and so takes no database-wide lock at its commit. It is an UPDATE of the claim row, so it is ordered against the
// completion by the row lock: after a completion it finds the status
// completed and updates nothing, and the waiter reads the answer instead.
// $1 org, $2 scope, $3 key.
const claimMarkWaited = `
UPDATE agent.idempotency_keys AS k SET waited = true
WHERE k.organization_id = $1 AND k.scope = $2 AND k.key = $3 AND k.status = 'processing'`
