package providerjobs

// The SQL of provider jobs and drops, in one place. Statements that write a
// time take the clock as coalesce($now::timestamptz, now()): production
// passes NULL, tests a stubbed instant.

const jobColumns = `j.id, j.organization_id, j.run_id, j.provider, j.provider_job_id,
	j.status, j.result, j.version, j.created_at, j.updated_at`

// jobInsert registers a pending job for a Run of the organization. The Run
// is read in the same statement, scoped to the organization, so a Run of
// another organization inserts nothing and the caller answers not found;
// the composite foreign key enforces the same tenant rule in the schema.
// A job the organization registered already under the same (provider,
// provider_job_id) also inserts nothing, without an error, and
// jobRegistered tells the two apart. Other organizations' jobs never
// conflict: the unique key starts with the organization.
// Its parameters are named (pgx.StrictNamedArgs).
const jobInsert = `
INSERT INTO agent.provider_jobs AS j
	(id, organization_id, run_id, provider, provider_job_id, status, created_at, updated_at)
SELECT @id::uuid, r.organization_id, r.id, @provider::text, @provider_job_id::text, 'pending', c.now, c.now
FROM agent.runs r, (SELECT coalesce(@now::timestamptz, now()) AS now) c
WHERE r.organization_id = @org AND r.id = @run_id
ON CONFLICT (organization_id, provider, provider_job_id) DO NOTHING
RETURNING ` + jobColumns

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

// jobResolve finds the job a callback's path names, by searchd's id and
// the provider, with its organization and the provider's id of the job,
// which the body must name. A job of another provider is not found: the
// path's provider is the one whose secret signed the delivery.
// $1 id, $2 provider.
const jobResolve = `
SELECT j.organization_id, j.provider_job_id
FROM agent.provider_jobs j
WHERE j.id = $1 AND j.provider = $2`

// jobApply sets the job to the delivery's status and result. The status
// condition is the terminal rule: a job that succeeded or failed is never
// changed again, so a late running, or a second terminal status, matches no
// row. Two deliveries for one job serialize on the row lock, and the second
// re-checks the condition against the first one's write. It is a
// set-to-value write: when the job already has the status and the result
// (compared as jsonb text), version and updated_at stay, so a repeat changes
// nothing further. $1 org, $2 id, $3 status, $4 result, $5 now.
const jobApply = `
UPDATE agent.provider_jobs AS j
SET status = $3, result = $4::jsonb,
	version = j.version + CASE WHEN ` + jobChanged + ` THEN 1 ELSE 0 END,
	updated_at = CASE WHEN ` + jobChanged + `
		THEN greatest(j.updated_at, coalesce($5::timestamptz, now())) ELSE j.updated_at END
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

// dropInsert records a dropped delivery. Its parameters are named (pgx.StrictNamedArgs):
// path_job_id is the path's job id as received, made storable; org is NULL
// for unknown_job.
const dropInsert = `
INSERT INTO agent.webhook_drops
	(id, provider, path_job_id, delivery_id, request_hash, reason, organization_id, received_at)
VALUES (@id, @provider, @path_job_id, @delivery_id, @request_hash, @reason, @org,
	coalesce(@now::timestamptz, now()))`

// The inbox: stage one of a callback (see inbox.go).

const inboxColumns = `i.id, i.provider, i.delivery_id, i.path_job_id, i.job_id, i.organization_id,
	i.request_hash, i.body_job_id, i.body_status, i.body_result, i.received_at, i.status,
	coalesce(i.reason, ''), coalesce(i.applied_by, ''), i.finished_at, i.lease_expires_at, i.attempts,
	coalesce(i.last_error, '')`

// inboxInsert lands an arrival, or nothing when its identity is stored
// already. DO NOTHING: a copy is told apart by the caller, which read the
// stored arrival first (a read waits for no lock). The lease is the
// handler's own, for the apply it makes right after the commit.
// Its parameters are named (pgx.StrictNamedArgs); the lease is microseconds.
const inboxInsert = `
INSERT INTO agent.provider_inbox AS i
	(id, provider, delivery_id, path_job_id, job_id, organization_id, request_hash,
	 body_job_id, body_status, body_result, received_at, lease_expires_at, attempts)
SELECT @id, @provider, @delivery_id, @path_job_id, @job_id, @org, @request_hash,
	@body_job_id, @body_status, @body_result::jsonb,
	c.now, c.now + @lease_us::bigint * interval '1 microsecond', 1
FROM (SELECT coalesce(@now::timestamptz, now()) AS now) c
ON CONFLICT (provider, delivery_id) DO NOTHING
RETURNING ` + inboxColumns

// inboxGet reads the arrival of a delivery. $1 provider, $2 delivery_id.
const inboxGet = `
SELECT ` + inboxColumns + `
FROM agent.provider_inbox i
WHERE i.provider = $1 AND i.delivery_id = $2`

// inboxGetByID reads one arrival. $1 id.
const inboxGetByID = `
SELECT ` + inboxColumns + `
FROM agent.provider_inbox i
WHERE i.id = $1`

// inboxCopy counts a copy of an arrival by the reason it was dropped for,
// and returns that reason's count, so the first copy of each reason is
// written to the drop audit and the rest are counted alone.
// $1 inbox id, $2 reason, $3 now.
const inboxCopy = `
INSERT INTO agent.provider_inbox_copies AS c
	(inbox_id, duplicates, hash_mismatches, path_mismatches, first_copy_at, last_copy_at)
VALUES ($1,
	CASE WHEN $2 = 'duplicate' THEN 1 ELSE 0 END,
	CASE WHEN $2 = 'hash_mismatch' THEN 1 ELSE 0 END,
	CASE WHEN $2 = 'path_mismatch' THEN 1 ELSE 0 END,
	coalesce($3::timestamptz, now()), coalesce($3::timestamptz, now()))
ON CONFLICT (inbox_id) DO UPDATE SET
	duplicates = c.duplicates + EXCLUDED.duplicates,
	hash_mismatches = c.hash_mismatches + EXCLUDED.hash_mismatches,
	path_mismatches = c.path_mismatches + EXCLUDED.path_mismatches,
	last_copy_at = greatest(c.last_copy_at, EXCLUDED.last_copy_at)
RETURNING CASE $2 WHEN 'duplicate' THEN c.duplicates
	WHEN 'hash_mismatch' THEN c.hash_mismatches ELSE c.path_mismatches END`

// inboxFinish marks a pending arrival applied or dropped. Conditional on
// pending, so of two workers that both reach it only one finishes it.
// $1 id, $2 status, $3 reason (NULL unless dropped), $4 applied_by, $5 now.
const inboxFinish = `
UPDATE agent.provider_inbox AS i
SET status = $2, reason = $3, applied_by = $4, finished_at = coalesce($5::timestamptz, now()), last_error = NULL
WHERE i.id = $1 AND i.status = 'pending'`

// inboxTake leases at most $3 pending arrivals whose lease has passed, for
// the applier, oldest lease first. SKIP LOCKED: the applier never waits on
// an arrival another worker is taking or finishing, and replicas take
// disjoint batches. $1 now, $2 lease µs, $3 bound.
const inboxTake = `
UPDATE agent.provider_inbox AS i
SET lease_expires_at = coalesce($1::timestamptz, now()) + $2::bigint * interval '1 microsecond',
	attempts = i.attempts + 1
WHERE i.id IN (
	SELECT p.id FROM agent.provider_inbox p
	WHERE p.status = 'pending' AND p.lease_expires_at <= coalesce($1::timestamptz, now())
	ORDER BY p.lease_expires_at
	LIMIT $3
	FOR UPDATE SKIP LOCKED)
	AND i.status = 'pending'
RETURNING ` + inboxColumns

// inboxRetry sets the time of a pending arrival's next attempt and the
// error of the last one. $1 id, $2 delay µs, $3 error, $4 now.
const inboxRetry = `
UPDATE agent.provider_inbox AS i
SET lease_expires_at = coalesce($4::timestamptz, now()) + $2::bigint * interval '1 microsecond',
	last_error = left($3, 1000)
WHERE i.id = $1 AND i.status = 'pending'`

// inboxStats counts the pending arrivals and the age of the oldest, by the
// database clock: the applier's lag. $1 now.
const inboxStats = `
SELECT count(*), coalesce(extract(epoch FROM coalesce($1::timestamptz, now()) - min(i.received_at)), 0)::float8
FROM agent.provider_inbox i
WHERE i.status = 'pending'`

// inboxCopies reads the copy counters of an arrival (zeros when none).
// $1 inbox id.
const inboxCopies = `
SELECT coalesce(c.duplicates, 0), coalesce(c.hash_mismatches, 0), coalesce(c.path_mismatches, 0), c.last_copy_at
FROM (SELECT) AS one
LEFT JOIN agent.provider_inbox_copies c ON c.inbox_id = $1`

// inboxList reads arrivals newest first, optionally of one provider ($1,
// NULL for all) and one status ($2, NULL for all), at most $3.
const inboxList = `
SELECT ` + inboxColumns + `
FROM agent.provider_inbox i
WHERE ($1::text IS NULL OR i.provider = $1) AND ($2::text IS NULL OR i.status = $2)
ORDER BY i.received_at DESC, i.id DESC
LIMIT $3`
