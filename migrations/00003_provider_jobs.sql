-- Provider jobs and the audit of dropped provider callbacks. See
-- providerjobs/ for the semantics each column serves.

-- +goose Up

-- The target of the tenant-checked foreign key from agent.provider_jobs: a
-- job names its Run together with its organization, so a job can never hang
-- off another organization's Run, whatever the code above the table does.
ALTER TABLE agent.runs ADD CONSTRAINT runs_org_id_key UNIQUE (organization_id, id);

-- A job this platform started at an outside provider for a Run. A provider
-- callback names no organization, only (provider, provider_job_id), so that
-- pair is unique across the platform: it is how a callback resolves its
-- tenant before it claims its delivery in agent.idempotency_keys.
--
-- status only moves forward: pending -> running -> succeeded | failed, and a
-- terminal status is never left (the set-to-value update is conditional on
-- it). version grows by one on every applied delivery, so "applied once" is
-- observable without a trigger.
--
-- ON DELETE CASCADE: a job is part of its Run. When the retention sweep
-- deletes a Run past its 396 days, its jobs go with it; nothing reads a job
-- whose Run is gone, and a callback for it then drops as unknown_job.
CREATE TABLE agent.provider_jobs (
    id              uuid        PRIMARY KEY,
    organization_id uuid        NOT NULL,
    run_id          uuid        NOT NULL,
    provider        text        NOT NULL,
    provider_job_id text        NOT NULL,
    status          text        NOT NULL DEFAULT 'pending',
    result          jsonb,
    version         bigint      NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,

    CONSTRAINT provider_jobs_provider_job_key UNIQUE (provider, provider_job_id),
    CONSTRAINT provider_jobs_run_fkey
        FOREIGN KEY (organization_id, run_id)
        REFERENCES agent.runs (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT provider_jobs_status_check
        CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
    -- A provider is the name of its webhook.<provider> claim scope.
    CONSTRAINT provider_jobs_provider_check
        CHECK (provider ~ '^[a-z0-9_-]+(\.[a-z0-9_-]+)*$' AND char_length(provider) <= 100),
    CONSTRAINT provider_jobs_provider_job_id_check
        CHECK (provider_job_id <> '' AND char_length(provider_job_id) <= 255),
    CONSTRAINT provider_jobs_result_object
        CHECK (result IS NULL OR jsonb_typeof(result) = 'object'),
    CONSTRAINT provider_jobs_version_check CHECK (version >= 1),
    CONSTRAINT provider_jobs_updated_check CHECK (updated_at >= created_at)
);

-- The jobs of a Run; it also serves the cascade when a Run is deleted.
CREATE INDEX provider_jobs_org_run_idx ON agent.provider_jobs (organization_id, run_id);

-- Every provider delivery that was authenticated but not applied, with its
-- reason, so no drop is a silent loss. Rows are written by the callback
-- handler alone and never updated.
--
-- provider_job_id is the job the path named, as received (made storable:
-- valid UTF-8, no NUL, at most 255 characters), because for unknown_job it
-- names no row of agent.provider_jobs. organization_id is NULL when the job
-- could not be resolved, and set for every other reason.
CREATE TABLE agent.webhook_drops (
    id              uuid        PRIMARY KEY,
    provider        text        NOT NULL,
    provider_job_id text        NOT NULL,
    delivery_id     text        NOT NULL,
    -- Hex SHA-256 of the raw body: the claim's request hash, so a
    -- hash_mismatch can be compared with the delivery that claimed the key.
    request_hash    text        NOT NULL,
    reason          text        NOT NULL,
    organization_id uuid,
    received_at     timestamptz NOT NULL,

    CONSTRAINT webhook_drops_reason_check
        CHECK (reason IN ('duplicate', 'hash_mismatch', 'unknown_job', 'job_mismatch')),
    CONSTRAINT webhook_drops_tenant_check
        CHECK (organization_id IS NOT NULL OR reason = 'unknown_job'),
    CONSTRAINT webhook_drops_provider_job_id_check CHECK (char_length(provider_job_id) <= 255),
    CONSTRAINT webhook_drops_delivery_id_check
        CHECK (delivery_id <> '' AND octet_length(delivery_id) <= 255),
    CONSTRAINT webhook_drops_request_hash_check CHECK (request_hash ~ '^[0-9a-f]{64}$')
);

-- The audit reads one provider's drops, newest first.
CREATE INDEX webhook_drops_provider_received_idx
    ON agent.webhook_drops (provider, received_at DESC, id DESC);

-- +goose Down
DROP TABLE agent.webhook_drops;
DROP TABLE agent.provider_jobs;
ALTER TABLE agent.runs DROP CONSTRAINT runs_org_id_key;
