-- The provider job directory is keyed by searchd's job id (issue 36.6).
--
-- Since 00015 the directory held each (provider, provider_job_id) once, in
-- the world: the first organization to register a provider job id held it,
-- and another organization's registration of the same id answered 409
-- "registered already ... by another organization". So one organization
-- could squat an id another would need (providers that number jobs per
-- account hand the same id to many of their customers), and the 409 told
-- anyone whether some organization had registered an id.
--
-- Now a provider job id is unique per organization only (the constraint
-- provider_jobs_org_provider_job_key of 00006, kept since), and the
-- directory holds one entry per job, keyed by the job's id: the {job_id}
-- of its callback path, a random UUID only the registering organization
-- learns. A callback resolves its job, and the job's organization, by the
-- path, one lookup by the primary key on the coordinator's copy of this
-- reference table; then the provider job id its signed body names must be
-- that job's, or it drops as job_mismatch (recorded under the path's job,
-- never applied). A delivery is so applied only to the job its path names
-- and its body names too.
--
-- The entries keep provider and provider_job_id: what the job is, for an
-- operator and for the sweeper's reads, no longer a key.
--
-- Safe on a populated table: the entries that exist name one job each
-- (00015 wrote one per pair, and a registration's takeover gave an entry a
-- new job, never a second one). Jobs that had none, those that shared their
-- pair with an older job of another organization before 00015, get theirs
-- here, so their callbacks are found from now on. A statement each, in the
-- migration's one transaction: on Citus the directory is a reference table,
-- whose DDL and rows every node takes in that transaction.
--
-- A contract step, listed in migrations/expand_test.go with its reason: a
-- replica of the previous release, during the roll, names the old key in
-- its registration's ON CONFLICT, which fails (500, nothing written; the
-- client retries and an upgraded replica answers), and resolves a callback
-- by the pair, which finds the one job of a pair a single organization
-- holds, as before. docs/deploy.md and the CHANGELOG's upgrade notes say so.

-- +goose Up
ALTER TABLE agent.provider_job_directory DROP CONSTRAINT provider_job_directory_pkey;

INSERT INTO agent.provider_job_directory
    (provider, provider_job_id, organization_id, job_id, registered_at, retain_until)
SELECT j.provider, j.provider_job_id, j.organization_id, j.id, j.created_at, j.created_at + interval '396 days'
FROM agent.provider_jobs j
LEFT JOIN agent.provider_job_directory d ON d.job_id = j.id
WHERE d.job_id IS NULL;

ALTER TABLE agent.provider_job_directory ADD CONSTRAINT provider_job_directory_pkey PRIMARY KEY (job_id);

COMMENT ON TABLE agent.provider_job_directory IS
    'one entry per provider job, by searchd''s job id (the {job_id} of its callback path): how a callback, which names no organization, finds its job and tenant';
COMMENT ON COLUMN agent.provider_job_directory.provider_job_id IS
    'the provider''s id of the job, unique per (organization_id, provider) only; a callback body''s job_id must equal it';

-- A drop names the job of the path it was posted to from now on.
COMMENT ON COLUMN agent.webhook_drops.job_id IS
    'the job the delivery''s callback path named, resolved through agent.provider_job_directory (before migration 00023: the job its signed body named); NULL for unknown_job';

-- +goose Down

-- The old key cannot hold one provider job id in two organizations: the
-- Down fails on it while such jobs exist, and one of them has to be
-- deleted first (as the Down of 00006 did).
COMMENT ON COLUMN agent.webhook_drops.job_id IS
    'the job the delivery''s signed body named, resolved through agent.provider_job_directory; NULL for unknown_job';
COMMENT ON COLUMN agent.provider_job_directory.provider_job_id IS NULL;
COMMENT ON TABLE agent.provider_job_directory IS NULL;
ALTER TABLE agent.provider_job_directory DROP CONSTRAINT provider_job_directory_pkey;
ALTER TABLE agent.provider_job_directory
    ADD CONSTRAINT provider_job_directory_pkey PRIMARY KEY (provider, provider_job_id);
