-- Provider jobs are addressed by searchd's own id, and a provider job id is
-- unique within an organization only. See providerjobs/ for the semantics.
--
-- Until now a callback named its job by (provider, provider_job_id) alone, so
-- that pair had to be unique across the platform, and the first organization
-- to register an id owned it: organization B could register the id of a job
-- the provider runs for organization A, and A's callbacks then landed on B's
-- job. A callback now names searchd's registration instead, the UUID
-- agent.provider_jobs.id that only the registering organization learns (in
-- the callback_path it hands to the provider), so the provider's id no
-- longer has to pick a tenant, and two organizations may register the same
-- one, each getting its own job.

-- +goose Up

-- The provider's id of a job names one job per organization and provider:
-- registering it again in the same organization finds the existing job
-- (for the same Run, a retried registration; for another Run, a conflict).
-- The index also serves that lookup. Callbacks resolve their job by the
-- primary key.
ALTER TABLE agent.provider_jobs DROP CONSTRAINT provider_jobs_provider_job_key;
ALTER TABLE agent.provider_jobs
    ADD CONSTRAINT provider_jobs_org_provider_job_key UNIQUE (organization_id, provider, provider_job_id);

COMMENT ON COLUMN agent.provider_jobs.id IS
    'searchd''s id of the job: the {job_id} of its callback path /v1/callbacks/{provider}/jobs/{job_id}';
COMMENT ON COLUMN agent.provider_jobs.provider_job_id IS
    'the provider''s own id of the job, unique per (organization_id, provider), which a callback body''s job_id must equal';

-- The drop audit kept the callback path's {job_id} in a column named
-- provider_job_id. The path now carries searchd's job id (as received: it
-- may be no UUID at all, for unknown_job), so the column is renamed after
-- what it holds. Rows written before this migration hold the provider's job
-- id, which was then the path's {job_id}, so the new name is true of them as
-- well. Still made storable: valid UTF-8, no NUL, at most 255 characters.
ALTER TABLE agent.webhook_drops RENAME COLUMN provider_job_id TO path_job_id;
ALTER TABLE agent.webhook_drops
    RENAME CONSTRAINT webhook_drops_provider_job_id_check TO webhook_drops_path_job_id_check;

COMMENT ON COLUMN agent.webhook_drops.path_job_id IS
    'the {job_id} of the callback path, as received and made storable (valid UTF-8, no NUL, at most 255 characters): searchd''s job id since migration 00006, the provider''s before it';

-- +goose Down

-- The old schema cannot hold one provider job id in two organizations: the
-- Down fails on the unique constraint while such jobs exist, and one of
-- them has to be deleted first.
COMMENT ON COLUMN agent.webhook_drops.path_job_id IS NULL;
ALTER TABLE agent.webhook_drops
    RENAME CONSTRAINT webhook_drops_path_job_id_check TO webhook_drops_provider_job_id_check;
ALTER TABLE agent.webhook_drops RENAME COLUMN path_job_id TO provider_job_id;

COMMENT ON COLUMN agent.provider_jobs.provider_job_id IS NULL;
COMMENT ON COLUMN agent.provider_jobs.id IS NULL;
ALTER TABLE agent.provider_jobs DROP CONSTRAINT provider_jobs_org_provider_job_key;
ALTER TABLE agent.provider_jobs
    ADD CONSTRAINT provider_jobs_provider_job_key UNIQUE (provider, provider_job_id);
