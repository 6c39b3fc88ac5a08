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
// $1 id, $2 org, $3 run_id, $4 provider, $5 provider_job_id, $6 now.
const jobInsert = `
INSERT INTO agent.provider_jobs AS j
	(id, organization_id, run_id, provider, provider_job_id, status, created_at, updated_at)
SELECT $1::uuid, r.organization_id, r.id, $4::text, $5::text, 'pending', c.now, c.now
FROM agent.runs r, (SELECT coalesce($6::timestamptz, now()) AS now) c
WHERE r.organization_id = $2 AND r.id = $3
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

// dropInsert records a dropped delivery. $1 id, $2 provider,
// $3 path_job_id (the path's job id as received, made storable),
// $4 delivery_id, $5 request_hash, $6 reason, $7 org (NULL for
// unknown_job), $8 now.
const dropInsert = `
INSERT INTO agent.webhook_drops
	(id, provider, path_job_id, delivery_id, request_hash, reason, organization_id, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8::timestamptz, now()))`
