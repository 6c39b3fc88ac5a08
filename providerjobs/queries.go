package providerjobs

// Times are coalesce($now::timestamptz, now()), or agent.clock($now) when
// updating a distributed table (Citus refuses the former there); NULL in
// production.

const jobColumns = `j.id, j.organization_id, j.run_id, j.provider, j.provider_job_id,
	j.status, j.result, j.version, j.created_at, j.updated_at`

// jobInsert registers a pending job for a Run of the organization; nothing
// for another organization's Run or a registered pair (jobRegistered tells
// which). Typed parameters: Citus plans INSERT ... SELECT before seeing them.
const jobInsert = `
INSERT INTO agent.provider_jobs AS j
	(id, organization_id, run_id, provider, provider_job_id, status, created_at, updated_at)
SELECT @id::uuid, r.organization_id, r.id, @provider::text, @provider_job_id::text, 'pending', c.now, c.now
FROM agent.runs r, (SELECT coalesce(@now::timestamptz, now()) AS now) c
WHERE r.organization_id = @org::uuid AND r.id = @run_id::uuid
ON CONFLICT (organization_id, provider, provider_job_id) DO NOTHING
RETURNING ` + jobColumns

// directoryInsert writes a new job's directory entry, kept @retention_us.
const directoryInsert = `
INSERT INTO agent.provider_job_directory
	(provider, provider_job_id, organization_id, job_id, registered_at, retain_until)
VALUES (@provider::text, @provider_job_id::text, @org::uuid, @job_id::uuid,
	@registered_at::timestamptz, @registered_at::timestamptz + @retention_us::bigint * interval '1 microsecond')`

// directoryResolve finds the job a callback path names; an entry past
// retention resolves until swept. $1 job id, $2 provider.
const directoryResolve = `
SELECT d.organization_id, d.provider_job_id
FROM agent.provider_job_directory d
WHERE d.job_id = $1 AND d.provider = $2`

// jobRegistered explains why jobInsert inserted nothing; a separate
// statement, so it sees a conflicting job committed after the insert's
// snapshot. $1 org, $2 run_id, $3 provider, $4 provider_job_id.
const jobRegistered = `
SELECT EXISTS (SELECT 1 FROM agent.runs r WHERE r.organization_id = $1 AND r.id = $2),
	j.id, j.run_id
FROM (SELECT) AS one
LEFT JOIN agent.provider_jobs j
	ON j.organization_id = $1 AND j.provider = $3 AND j.provider_job_id = $4`

// jobGet reads one job. $1 org, $2 id.
const jobGet = `
SELECT ` + jobColumns + `
FROM agent.provider_jobs j
WHERE j.organization_id = $1 AND j.id = $2`

// jobApply sets status and result unless terminal, under the row lock; no
// change leaves version and updated_at alone. The clock is a function in
// FROM because Citus refuses one in a modifying CASE.
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

// jobChanged reports whether jobApply changes the job.
const jobChanged = `(j.status IS DISTINCT FROM $3::text
	OR j.result::text IS DISTINCT FROM ($4::jsonb)::text)`

// jobStatus reads a job's status. $1 org, $2 id.
const jobStatus = `
SELECT j.status
FROM agent.provider_jobs j
WHERE j.organization_id = $1 AND j.id = $2`

// dropInsert records a dropped delivery, one row per delivery and reason;
// org and job_id are NULL for unknown_job.
const dropInsert = `
INSERT INTO agent.webhook_drops
	(id, provider, path_job_id, delivery_id, request_hash, reason, organization_id, job_id, received_at)
VALUES (@id::uuid, @provider::text, @path_job_id::text, @delivery_id::text, @request_hash::text, @reason::text,
	@org::uuid, @job_id::uuid, coalesce(@now::timestamptz, now()))
ON CONFLICT (provider, delivery_id, reason) WHERE reason IN ('unknown_job', 'job_mismatch') DO NOTHING`

const inboxColumns = `i.id, i.provider, i.delivery_id, i.path_job_id, i.job_id, i.organization_id,
	i.request_hash, i.body_job_id, i.body_status, i.body_result, i.received_at, i.status,
	coalesce(i.reason, ''), coalesce(i.applied_by, ''), i.finished_at, i.lease_expires_at, i.attempts,
	coalesce(i.last_error, '')`

// inboxInsert lands an arrival with the handler's lease (µs), or does nothing
// when it is stored.
const inboxInsert = `
INSERT INTO agent.provider_inbox AS i
	(id, provider, delivery_id, path_job_id, job_id, organization_id, request_hash,
	 body_job_id, body_status, body_result, received_at, lease_expires_at, attempts)
VALUES (@id::uuid, @provider::text, @delivery_id::text, @path_job_id::text, @job_id::uuid, @org::uuid,
	@request_hash::text, @body_job_id::text, @body_status::text, @body_result::jsonb,
	coalesce(@now::timestamptz, now()), coalesce(@now::timestamptz, now()) + @lease_us::bigint * interval '1 microsecond', 1)
ON CONFLICT (organization_id, provider, delivery_id) DO NOTHING
RETURNING ` + inboxColumns

// inboxGet reads a delivery's arrival. $1 org, $2 provider, $3 delivery_id.
const inboxGet = `
SELECT ` + inboxColumns + `
FROM agent.provider_inbox i
WHERE i.organization_id = $1 AND i.provider = $2 AND i.delivery_id = $3`

// inboxFind reads a delivery id's arrivals in every organization. $1 provider, $2 delivery_id.
const inboxFind = `
SELECT ` + inboxColumns + `
FROM agent.provider_inbox i
WHERE i.provider = $1 AND i.delivery_id = $2
ORDER BY i.received_at, i.id`

// inboxCopy counts a dropped copy (one of $3, $4, $5 is 1) and returns the
// counts; the caller picks the reason because Citus mis-deparses a CASE on a
// parameter here. $1 org, $2 inbox id, $6 now.
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

// inboxFinish marks a pending arrival applied or dropped; one of racing
// workers succeeds. $1 org, $2 id, $3 status, $4 reason, $5 applied_by, $6 now.
const inboxFinish = `
UPDATE agent.provider_inbox AS i
SET status = $3, reason = $4, applied_by = $5, finished_at = agent.clock($6), last_error = NULL
WHERE i.organization_id = $1 AND i.id = $2 AND i.status = 'pending'`

// inboxDue is the applier's shardpass.Pass: organizations with pending
// arrivals past their lease, oldest first. Named parameters @now, @limit.
const inboxDue = `
SELECT i.organization_id::text
FROM agent.provider_inbox i
WHERE i.status = 'pending' AND i.lease_expires_at <= coalesce(@now::timestamptz, now())
ORDER BY i.lease_expires_at
LIMIT @limit`

// inboxTake leases at most @limit pending arrivals past their lease, of one
// shard's organizations (@all: every one), oldest lease first. SKIP LOCKED:
// the applier never waits on an arrival another worker holds, and replicas
// take disjoint batches. Named parameters @now, @lease_us, @all, @keys, @limit.
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

// inboxRetry schedules a pending arrival's next attempt. $1 org, $2 id,
// $3 delay µs, $4 error, $5 now.
const inboxRetry = `
UPDATE agent.provider_inbox AS i
SET lease_expires_at = agent.clock($5) + $3::bigint * interval '1 microsecond',
	last_error = left($4, 1000)
WHERE i.organization_id = $1 AND i.id = $2 AND i.status = 'pending'`

// inboxStats counts pending arrivals and the oldest's age. $1 now.
const inboxStats = `
SELECT count(*), coalesce(extract(epoch FROM coalesce($1::timestamptz, now()) - min(i.received_at)), 0)::float8
FROM agent.provider_inbox i
WHERE i.status = 'pending'`

// inboxCopies reads an arrival's copy counters. $1 org, $2 inbox id.
const inboxCopies = `
SELECT coalesce(c.duplicates, 0), coalesce(c.hash_mismatches, 0), coalesce(c.path_mismatches, 0), c.last_copy_at
FROM (SELECT) AS one
LEFT JOIN agent.provider_inbox_copies c ON c.organization_id = $1 AND c.inbox_id = $2`

// inboxList reads arrivals newest first. $1 provider, $2 status (NULL for all), $3 limit.
const inboxList = `
SELECT ` + inboxColumns + `
FROM agent.provider_inbox i
WHERE ($1::text IS NULL OR i.provider = $1) AND ($2::text IS NULL OR i.status = $2)
ORDER BY i.received_at DESC, i.id DESC
LIMIT $3`

// dropListByJob reads a job's newest drops. $1 org, $2 job id, $3 limit.
const dropListByJob = `
SELECT d.id, d.delivery_id, d.reason, d.request_hash, d.received_at
FROM agent.webhook_drops d
WHERE d.organization_id = $1 AND d.job_id = $2
ORDER BY d.received_at DESC, d.id DESC
LIMIT $3`
