package providerjobs

// The SQL of provider jobs and drops, in one place. Statements that write a
// time take the clock as coalesce($now::timestamptz, now()), or
// agent.clock($now) where they update a distributed table (Citus refuses
// the first there; see migration 00019): production passes NULL, tests a
// stubbed instant.

const jobColumns = `j.id, j.organization_id, j.run_id, j.provider, j.provider_job_id,
	j.status, j.result, j.version, j.created_at, j.updated_at`

// jobInsert registers a pending job for a Run of the organization. The Run
// is read in the same statement, scoped to the organization, so a Run of
// another organization inserts nothing and the caller answers not found;
// the composite foreign key enforces the same tenant rule in the schema.
// A job the organization registered already under the same (provider,
// provider_job_id) also inserts nothing, without an error, and
// jobRegistered tells the two apart. Every parameter is typed: on a
// cluster an INSERT ... SELECT is planned before its parameters are sent.
// Its parameters are named (pgx.StrictNamedArgs).
const jobInsert = `
INSERT INTO agent.provider_jobs AS j
	(id, organization_id, run_id, provider, provider_job_id, status, created_at, updated_at)
SELECT @id::uuid, r.organization_id, r.id, @provider::text, @provider_job_id::text, 'pending', c.now, c.now
FROM agent.runs r, (SELECT coalesce(@now::timestamptz, now()) AS now) c
WHERE r.organization_id = @org::uuid AND r.id = @run_id::uuid
ON CONFLICT (organization_id, provider, provider_job_id) DO NOTHING
RETURNING ` + jobColumns

// directoryInsert writes the directory entry of a job just registered,
// keyed by the job's id: the {job_id} of its callback path names it from
// now on, until its registration plus the Run retention (@retention_us),
// which its Run, created before it, never outlives. The id is fresh, so
// the entry never meets another; the provider job id is no key here (it
// is unique per organization, in agent.provider_jobs). Its parameters are
// named (pgx.StrictNamedArgs).
const directoryInsert = `
INSERT INTO agent.provider_job_directory
	(provider, provider_job_id, organization_id, job_id, registered_at, retain_until)
VALUES (@provider::text, @provider_job_id::text, @org::uuid, @job_id::uuid,
	@registered_at::timestamptz, @registered_at::timestamptz + @retention_us::bigint * interval '1 microsecond')`

// directoryResolve finds the job a callback path names, with its
// organization and the provider job id it was registered under: how a
// callback, which names no organization, resolves its tenant, by the
// directory's primary key. A job of another provider than the path's is
// not found. An entry past its retention still names its job until the
// sweeper deletes it; a job gone with its Run is found missing by the
// apply. $1 job id (searchd's), $2 provider.
const directoryResolve = `
SELECT d.organization_id, d.provider_job_id
FROM agent.provider_job_directory d
WHERE d.job_id = $1 AND d.provider = $2`

// jobRegistered explains a jobInsert that inserted nothing: whether the
// organization has the Run, and the id and Run of the job it registered
// under the pair, NULL when none. A statement of its own, so it sees a
// conflicting job committed after the insert's snapshot was taken.
// $1 org, $2 run_id, $3 provider, $4 provider_job_id.
const jobRegistered = `
SELECT EXISTS (SELECT 1 FROM agent.runs r WHERE r.organization_id = $1 AND r.id = $2),
	j.id, j.run_id
FROM (SELECT) AS one
LEFT JOIN agent.provider_jobs j
	ON j.organization_id = $1 AND j.provider = $3 AND j.provider_job_id = $4`

// jobGet reads one job of an organization. $1 org, $2 id.
const jobGet = `
SELECT ` + jobColumns + `
FROM agent.provider_jobs j
WHERE j.organization_id = $1 AND j.id = $2`

// jobApply sets the job to the delivery's status and result. The status
// condition is the terminal rule: a job that succeeded or failed is never
// changed again, so a late running, or a second terminal status, matches no
// row. Two deliveries for one job serialize on the row lock, and the second
// re-checks the condition against the first one's write. It is a
// set-to-value write: when the job already has the status and the result
// (compared as jsonb text), version and updated_at stay, so a repeat changes
// nothing further. The clock is joined in as a function in FROM, a column
// of the CASE: Citus refuses a clock inside a CASE of a data-modifying
// statement, and plans a subquery in its FROM as a step of its own, where
// it evaluates a function there once and routes the statement.
// $1 org, $2 id, $3 status, $4 result, $5 now.
const jobApply = `
UPDATE agent.provider_jobs AS j
SET status = $3, result = $4::jsonb,
	version = j.version + CASE WHEN ` + jobChanged + ` THEN 1 ELSE 0 END,
	updated_at = CASE WHEN ` + jobChanged + ` THEN greatest(j.updated_at, c.now) ELSE j.updated_at END
FROM agent.clock($5::timestamptz) AS c(now)
WHERE j.organization_id = $1 AND j.id = $2
	AND j.status NOT IN ('succeeded', 'failed')
RETURNING j.status`

// jobChanged is whether jobApply's status and result differ from the job's.
const jobChanged = `(j.status IS DISTINCT FROM $3::text
	OR j.result::text IS DISTINCT FROM ($4::jsonb)::text)`

// jobStatus reads the status of a job the apply left unchanged. $1 org,
// $2 id.
const jobStatus = `
SELECT j.status
FROM agent.provider_jobs j
WHERE j.organization_id = $1 AND j.id = $2`

// dropInsert records a dropped delivery. Its parameters are named
// (pgx.StrictNamedArgs): path_job_id is the path's job id as received, made
// storable; org and job_id are the job the delivery named and its
// organization, both NULL for unknown_job. A delivery that named no job, or
// was posted to the path of another job than the one it names, is never
// landed, so its drop is the only record of it: each copy writes it, and
// the unique index keeps one row per delivery and reason (DO NOTHING).
const dropInsert = `
INSERT INTO agent.webhook_drops
	(id, provider, path_job_id, delivery_id, request_hash, reason, organization_id, job_id, received_at)
VALUES (@id::uuid, @provider::text, @path_job_id::text, @delivery_id::text, @request_hash::text, @reason::text,
	@org::uuid, @job_id::uuid, coalesce(@now::timestamptz, now()))
ON CONFLICT (provider, delivery_id, reason) WHERE reason IN ('unknown_job', 'job_mismatch') DO NOTHING`

// The inbox: stage one of a callback (see inbox.go).

const inboxColumns = `i.id, i.provider, i.delivery_id, i.path_job_id, i.job_id, i.organization_id,
	i.request_hash, i.body_job_id, i.body_status, i.body_result, i.received_at, i.status,
	coalesce(i.reason, ''), coalesce(i.applied_by, ''), i.finished_at, i.lease_expires_at, i.attempts,
	coalesce(i.last_error, '')`

// inboxInsert lands an arrival of a delivery that resolved to its job, or
// nothing when its identity is stored already. DO NOTHING: a copy is told
// apart by the caller, which read the stored arrival first (a read waits
// for no lock). The lease is the handler's own, for the apply it makes
// right after the commit. Its parameters are named (pgx.StrictNamedArgs);
// the lease is microseconds.
const inboxInsert = `
INSERT INTO agent.provider_inbox AS i
	(id, provider, delivery_id, path_job_id, job_id, organization_id, request_hash,
	 body_job_id, body_status, body_result, received_at, lease_expires_at, attempts)
VALUES (@id::uuid, @provider::text, @delivery_id::text, @path_job_id::text, @job_id::uuid, @org::uuid,
	@request_hash::text, @body_job_id::text, @body_status::text, @body_result::jsonb,
	coalesce(@now::timestamptz, now()), coalesce(@now::timestamptz, now()) + @lease_us::bigint * interval '1 microsecond', 1)
ON CONFLICT (organization_id, provider, delivery_id) DO NOTHING
RETURNING ` + inboxColumns

// inboxGet reads the arrival of a delivery in the organization of the job
// it names. $1 org, $2 provider, $3 delivery_id.
const inboxGet = `
SELECT ` + inboxColumns + `
FROM agent.provider_inbox i
WHERE i.organization_id = $1 AND i.provider = $2 AND i.delivery_id = $3`

// inboxFind reads the arrivals of a delivery id in every organization
// (an operator's look-up: a delivery id is unique per organization).
// $1 provider, $2 delivery_id.
const inboxFind = `
SELECT ` + inboxColumns + `
FROM agent.provider_inbox i
WHERE i.provider = $1 AND i.delivery_id = $2
ORDER BY i.received_at, i.id`

// inboxCopy counts a copy of an arrival by the reason it was dropped for
// (one of $3, $4, $5 is 1, the others 0), and returns the three counts, so
// the first copy of each reason is written to the drop audit and the rest
// are counted alone. The caller picks the reason: Citus deparses a CASE
// on a parameter in this statement wrongly ("operator does not exist:
// text = boolean" on the worker). $1 org, $2 inbox id, $3 duplicate,
// $4 hash mismatch, $5 path mismatch, $6 now.
const inboxCopy = `
INSERT INTO agent.provider_inbox_copies AS c
	(organization_id, inbox_id, duplicates, hash_mismatches, path_mismatches, first_copy_at, last_copy_at)
VALUES ($1::uuid, $2::uuid, $3::bigint, $4::bigint, $5::bigint,
	coalesce($6::timestamptz, now()), coalesce($6::timestamptz, now()))
ON CONFLICT (inbox_id, organization_id) DO UPDATE SET
	duplicates = c.duplicates + EXCLUDED.duplicates,
	hash_mismatches = c.hash_mismatches + EXCLUDED.hash_mismatches,
	path_mismatches = c.path_mismatches + EXCLUDED.path_mismatches,
	last_copy_at = greatest(c.last_copy_at, EXCLUDED.last_copy_at)
RETURNING c.duplicates, c.hash_mismatches, c.path_mismatches`

// inboxFinish marks a pending arrival applied or dropped. Conditional on
// pending, so of two workers that both reach it only one finishes it.
// $1 org, $2 id, $3 status, $4 reason (NULL unless dropped), $5 applied_by,
// $6 now.
const inboxFinish = `
UPDATE agent.provider_inbox AS i
SET status = $3, reason = $4, applied_by = $5, finished_at = agent.clock($6), last_error = NULL
WHERE i.organization_id = $1 AND i.id = $2 AND i.status = 'pending'`

// inboxDue is the applier's shardpass.Pass: the organizations of the
// pending arrivals whose lease has passed, oldest lease first, on
// provider_inbox_pending_idx. Named parameters: @now, and @limit from the
// pass.
const inboxDue = `
SELECT i.organization_id::text
FROM agent.provider_inbox i
WHERE i.status = 'pending' AND i.lease_expires_at <= coalesce(@now::timestamptz, now())
ORDER BY i.lease_expires_at
LIMIT @limit`

// inboxTake leases at most @limit pending arrivals whose lease has passed,
// of the organizations of one shard (@all: every organization), for the
// applier, oldest lease first. SKIP LOCKED: the applier never waits on an
// arrival another worker is taking or finishing, and replicas take disjoint
// batches. Named parameters: @now, @lease_us, and @all, @keys, @limit of
// the shard's group.
const inboxTake = `
UPDATE agent.provider_inbox AS i
SET lease_expires_at = agent.clock(@now) + @lease_us::bigint * interval '1 microsecond',
	attempts = i.attempts + 1
WHERE i.id IN (
	SELECT p.id FROM agent.provider_inbox p
	WHERE (@all::boolean OR p.organization_id = ANY(@keys::uuid[]))
		AND p.status = 'pending' AND p.lease_expires_at <= agent.clock(@now)
	ORDER BY p.lease_expires_at
	LIMIT @limit
	FOR UPDATE SKIP LOCKED)
	AND (@all::boolean OR i.organization_id = ANY(@keys::uuid[]))
	AND i.status = 'pending'
RETURNING ` + inboxColumns

// inboxRetry sets the time of a pending arrival's next attempt and the
// error of the last one. $1 org, $2 id, $3 delay µs, $4 error, $5 now.
const inboxRetry = `
UPDATE agent.provider_inbox AS i
SET lease_expires_at = agent.clock($5) + $3::bigint * interval '1 microsecond',
	last_error = left($4, 1000)
WHERE i.organization_id = $1 AND i.id = $2 AND i.status = 'pending'`

// inboxStats counts the pending arrivals and the age of the oldest, by the
// database clock: the applier's lag. On a cluster it reads every shard,
// without a lock. $1 now.
const inboxStats = `
SELECT count(*), coalesce(extract(epoch FROM coalesce($1::timestamptz, now()) - min(i.received_at)), 0)::float8
FROM agent.provider_inbox i
WHERE i.status = 'pending'`

// inboxCopies reads the copy counters of an arrival (zeros when none).
// $1 org, $2 inbox id.
const inboxCopies = `
SELECT coalesce(c.duplicates, 0), coalesce(c.hash_mismatches, 0), coalesce(c.path_mismatches, 0), c.last_copy_at
FROM (SELECT) AS one
LEFT JOIN agent.provider_inbox_copies c ON c.organization_id = $1 AND c.inbox_id = $2`

// inboxList reads arrivals newest first, optionally of one provider ($1,
// NULL for all) and one status ($2, NULL for all), at most $3.
const inboxList = `
SELECT ` + inboxColumns + `
FROM agent.provider_inbox i
WHERE ($1::text IS NULL OR i.provider = $1) AND ($2::text IS NULL OR i.status = $2)
ORDER BY i.received_at DESC, i.id DESC
LIMIT $3`

// dropListByJob reads the newest drops recorded for a job of an
// organization: those posted to its callback path (since migration 00023;
// before, those whose signed body named it), by webhook_drops_org_job_idx. $1 org, $2 job id, $3 limit.
const dropListByJob = `
SELECT d.id, d.delivery_id, d.reason, d.request_hash, d.received_at
FROM agent.webhook_drops d
WHERE d.organization_id = $1 AND d.job_id = $2
ORDER BY d.received_at DESC, d.id DESC
LIMIT $3`
