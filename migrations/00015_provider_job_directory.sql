-- A provider's job id names one job in the world (issue 24.3).
--
-- Migration 00006 made (provider, provider_job_id) unique per organization
-- and let a callback find its job by searchd's id in the path. Two
-- organizations could then hold a job with the same provider job id, and a
-- signed delivery about one organization's job, posted to the other's
-- callback path, matched that job's registration and was applied there; the
-- genuine copy then met the stored delivery id on its own path and was
-- dropped, so the job it was about stayed pending for ever, and the drop was
-- recorded under the wrong organization.
--
-- Now the directory below holds every (provider, provider_job_id) once,
-- with the job and the organization it names. A registration writes its
-- entry in the transaction that writes the job; a pair another job holds
-- is refused (409 already_registered) and nothing is written. A callback
-- resolves the job its signed body names through the directory, by the
-- pair, before it claims or lands anything: a path that names another job
-- drops as job_mismatch, recorded under the organization and the job the
-- body named, and is not landed, so it cannot bind the delivery id to the
-- wrong path. The directory is also what a callback needs on a cluster
-- sharded by organization (docs/scaling.md): one lookup by the pair, never
-- a search of every organization.
--
-- The directory has no foreign key to the job: on Citus it is sharded by
-- provider_job_id, apart from the jobs (sharded by organization). An entry
-- whose job is gone (its Run passed its retention) is taken over by the
-- next registration of the pair, and the sweeper deletes entries once
-- their retention has passed: the registration plus the Run retention (396
-- days), which the job's Run, created before it, never outlives.

-- +goose Up
CREATE TABLE agent.provider_job_directory (
    provider        text        NOT NULL,
    provider_job_id text        NOT NULL,
    organization_id uuid        NOT NULL,
    job_id          uuid        NOT NULL,
    registered_at   timestamptz NOT NULL,
    -- registered_at plus the Run retention: the job's Run, and so the
    -- job, is gone by then.
    retain_until    timestamptz NOT NULL,

    CONSTRAINT provider_job_directory_pkey PRIMARY KEY (provider, provider_job_id),
    CONSTRAINT provider_job_directory_retention_check CHECK (retain_until > registered_at)
);

-- The sweeper reads entries past their retention, oldest first.
CREATE INDEX provider_job_directory_retain_until_idx ON agent.provider_job_directory (retain_until);

-- Every job that exists, once per pair: where two organizations registered
-- the same pair before this migration, the first registration keeps it.
-- The later ones stay (their own organization reads them), but callbacks
-- about the pair resolve to the first; re-register them under the
-- provider's real id. The migration's notice counts them.
INSERT INTO agent.provider_job_directory
    (provider, provider_job_id, organization_id, job_id, registered_at, retain_until)
SELECT DISTINCT ON (j.provider, j.provider_job_id)
    j.provider, j.provider_job_id, j.organization_id, j.id, j.created_at, j.created_at + interval '396 days'
FROM agent.provider_jobs j
ORDER BY j.provider, j.provider_job_id, j.created_at, j.id;

-- +goose StatementBegin
DO $$
DECLARE
    shadowed bigint;
BEGIN
    SELECT count(*) INTO shadowed
    FROM agent.provider_jobs j
    JOIN agent.provider_job_directory d ON d.provider = j.provider AND d.provider_job_id = j.provider_job_id
    WHERE d.job_id <> j.id;
    IF shadowed > 0 THEN
        RAISE NOTICE '% provider jobs share their (provider, provider_job_id) with an older job of another organization; callbacks about the pair resolve to the older one', shadowed;
    END IF;
END;
$$;
-- +goose StatementEnd

-- A drop names the job its delivery was about, so the job's organization
-- reads it on that job, whatever path the delivery was posted to. Drops
-- written since 00006 name it by their path (the job it resolved to); a
-- path that is not a UUID named no job.
ALTER TABLE agent.webhook_drops ADD COLUMN job_id uuid;
UPDATE agent.webhook_drops
SET job_id = path_job_id::uuid
WHERE organization_id IS NOT NULL
    AND path_job_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';
ALTER TABLE agent.webhook_drops ADD CONSTRAINT webhook_drops_job_check
    CHECK (job_id IS NULL OR organization_id IS NOT NULL);
COMMENT ON COLUMN agent.webhook_drops.job_id IS
    'the job the delivery''s signed body named, resolved through agent.provider_job_directory; NULL for unknown_job';

DROP INDEX agent.webhook_drops_org_job_received_idx;
DROP INDEX agent.webhook_drops_org_job_idx;
-- The drops of one job, newest first (the API's and the console's).
CREATE INDEX webhook_drops_org_job_idx
    ON agent.webhook_drops (organization_id, job_id, received_at DESC, id DESC)
    WHERE job_id IS NOT NULL;

-- The inbox holds only deliveries that resolved to a job, on that job's
-- path, so each arrival belongs to the organization of its job, and its
-- keys carry it: an arrival is unique per (organization, provider, delivery
-- id), the key its claim is unique by too. A delivery naming no job
-- (unknown_job), or posted to another job's path (job_mismatch), is never
-- landed: its drop is recorded at once, and is its only record, once per
-- delivery and reason however often it is re-sent. Arrivals that resolved
-- to no job are finished (their drop is in the audit) or still pending:
-- those are recorded as the applier would have, and both go.
DELETE FROM agent.webhook_drops d
USING agent.webhook_drops e
WHERE d.reason IN ('unknown_job', 'job_mismatch')
    AND e.provider = d.provider AND e.delivery_id = d.delivery_id AND e.reason = d.reason
    AND (e.received_at, e.id) < (d.received_at, d.id);
CREATE UNIQUE INDEX webhook_drops_unlanded_key
    ON agent.webhook_drops (provider, delivery_id, reason)
    WHERE reason IN ('unknown_job', 'job_mismatch');

INSERT INTO agent.webhook_drops
    (id, provider, path_job_id, delivery_id, request_hash, reason, organization_id, received_at)
SELECT gen_random_uuid(), i.provider, i.path_job_id, i.delivery_id, i.request_hash, 'unknown_job', NULL, i.received_at
FROM agent.provider_inbox i
WHERE i.organization_id IS NULL AND i.status = 'pending'
ON CONFLICT (provider, delivery_id, reason) WHERE reason IN ('unknown_job', 'job_mismatch') DO NOTHING;
DELETE FROM agent.provider_inbox WHERE organization_id IS NULL;
-- A pending arrival whose body names another job than its path's is now
-- refused before it lands; one landed before is dropped as it would have
-- been applied, with the job its body names (NULL when none does).
WITH m AS (
    UPDATE agent.provider_inbox i
    SET status = 'dropped', reason = 'job_mismatch', applied_by = 'applier', finished_at = now()
    FROM agent.provider_jobs j
    WHERE i.status = 'pending' AND j.organization_id = i.organization_id AND j.id = i.job_id
        AND j.provider_job_id <> i.body_job_id
    RETURNING i.*
)
INSERT INTO agent.webhook_drops
    (id, provider, path_job_id, delivery_id, request_hash, reason, organization_id, job_id, received_at)
SELECT gen_random_uuid(), m.provider, m.path_job_id, m.delivery_id, m.request_hash, 'job_mismatch',
    d.organization_id, d.job_id, m.received_at
FROM m
LEFT JOIN agent.provider_job_directory d ON d.provider = m.provider AND d.provider_job_id = m.body_job_id
WHERE d.job_id IS NOT NULL
ON CONFLICT (provider, delivery_id, reason) WHERE reason IN ('unknown_job', 'job_mismatch') DO NOTHING;

ALTER TABLE agent.provider_inbox DROP CONSTRAINT provider_inbox_tenant_check;
ALTER TABLE agent.provider_inbox ALTER COLUMN organization_id SET NOT NULL;
ALTER TABLE agent.provider_inbox ALTER COLUMN job_id SET NOT NULL;

ALTER TABLE agent.provider_inbox_copies ADD COLUMN organization_id uuid;
UPDATE agent.provider_inbox_copies c
SET organization_id = i.organization_id
FROM agent.provider_inbox i
WHERE i.id = c.inbox_id;
ALTER TABLE agent.provider_inbox_copies ALTER COLUMN organization_id SET NOT NULL;
ALTER TABLE agent.provider_inbox_copies DROP CONSTRAINT provider_inbox_copies_inbox_id_fkey;
ALTER TABLE agent.provider_inbox_copies DROP CONSTRAINT provider_inbox_copies_pkey;
ALTER TABLE agent.provider_inbox_copies ADD CONSTRAINT provider_inbox_copies_pkey PRIMARY KEY (inbox_id, organization_id);

ALTER TABLE agent.provider_inbox DROP CONSTRAINT provider_inbox_pkey;
ALTER TABLE agent.provider_inbox ADD CONSTRAINT provider_inbox_pkey PRIMARY KEY (id, organization_id);
ALTER TABLE agent.provider_inbox DROP CONSTRAINT provider_inbox_delivery_key;
ALTER TABLE agent.provider_inbox
    ADD CONSTRAINT provider_inbox_delivery_key UNIQUE (organization_id, provider, delivery_id);

ALTER TABLE agent.provider_inbox_copies
    ADD CONSTRAINT provider_inbox_copies_inbox_fkey
    FOREIGN KEY (inbox_id, organization_id) REFERENCES agent.provider_inbox (id, organization_id) ON DELETE CASCADE;

-- +goose Down
ALTER TABLE agent.provider_inbox_copies DROP CONSTRAINT provider_inbox_copies_inbox_fkey;
ALTER TABLE agent.provider_inbox DROP CONSTRAINT provider_inbox_delivery_key;
ALTER TABLE agent.provider_inbox ADD CONSTRAINT provider_inbox_delivery_key UNIQUE (provider, delivery_id);
ALTER TABLE agent.provider_inbox DROP CONSTRAINT provider_inbox_pkey;
ALTER TABLE agent.provider_inbox ADD CONSTRAINT provider_inbox_pkey PRIMARY KEY (id);
ALTER TABLE agent.provider_inbox_copies DROP CONSTRAINT provider_inbox_copies_pkey;
ALTER TABLE agent.provider_inbox_copies ADD CONSTRAINT provider_inbox_copies_pkey PRIMARY KEY (inbox_id);
ALTER TABLE agent.provider_inbox_copies
    ADD CONSTRAINT provider_inbox_copies_inbox_id_fkey
    FOREIGN KEY (inbox_id) REFERENCES agent.provider_inbox (id) ON DELETE CASCADE;
ALTER TABLE agent.provider_inbox_copies DROP COLUMN organization_id;
ALTER TABLE agent.provider_inbox ALTER COLUMN job_id DROP NOT NULL;
ALTER TABLE agent.provider_inbox ALTER COLUMN organization_id DROP NOT NULL;
ALTER TABLE agent.provider_inbox
    ADD CONSTRAINT provider_inbox_tenant_check CHECK ((job_id IS NULL) = (organization_id IS NULL));

DROP INDEX agent.webhook_drops_unlanded_key;
DROP INDEX agent.webhook_drops_org_job_idx;
CREATE INDEX webhook_drops_org_job_received_idx
    ON agent.webhook_drops (organization_id, provider, path_job_id, received_at DESC, id DESC)
    WHERE organization_id IS NOT NULL;
CREATE INDEX webhook_drops_org_job_idx
    ON agent.webhook_drops (organization_id, path_job_id, received_at DESC, id DESC)
    WHERE organization_id IS NOT NULL;
ALTER TABLE agent.webhook_drops DROP CONSTRAINT webhook_drops_job_check;
ALTER TABLE agent.webhook_drops DROP COLUMN job_id;

DROP TABLE agent.provider_job_directory;
