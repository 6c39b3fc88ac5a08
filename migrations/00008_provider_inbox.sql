-- The provider inbox: stage one of a provider callback. See providerjobs/
-- for the semantics each column serves.
--
-- A callback is acknowledged only after its arrival is committed here, under
-- the delivery's identity (provider, delivery_id): across organizations, so
-- a delivery id names one arrival whatever path it is posted to. Stage two
-- applies the arrival through the idempotency plane (webhook.<provider>
-- claim, set-to-value update of the job, completion) and marks it applied
-- or dropped in the same transaction. What a provider sends again adds to
-- the arrival's counters in agent.provider_inbox_copies, never a row.

-- +goose Up

CREATE TABLE agent.provider_inbox (
    id               uuid        PRIMARY KEY,
    provider         text        NOT NULL,
    delivery_id      text        NOT NULL,
    -- The {job_id} of the path the delivery arrived on, as received (made
    -- storable). A copy on another path is dropped as path_mismatch.
    path_job_id      text        NOT NULL,
    -- The job the path resolved to when the delivery landed, and its
    -- organization; NULL when the path names no job of the provider.
    job_id           uuid,
    organization_id  uuid,
    -- Hex SHA-256 of the raw body: the claim's request hash.
    request_hash     text        NOT NULL,
    -- The parsed content of the body: what stage two applies.
    body_job_id      text        NOT NULL,
    body_status      text        NOT NULL,
    body_result      jsonb,
    received_at      timestamptz NOT NULL,
    -- pending until stage two applied or dropped it.
    status           text        NOT NULL DEFAULT 'pending',
    reason           text,
    applied_by       text,
    finished_at      timestamptz,
    -- The apply lease: the worker that set it owns the apply until then;
    -- after a failed attempt it is the time of the next one (the backoff).
    -- A pending arrival whose lease has passed is the applier's.
    lease_expires_at timestamptz NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0,
    last_error       text,

    CONSTRAINT provider_inbox_delivery_key UNIQUE (provider, delivery_id),
    CONSTRAINT provider_inbox_status_check CHECK (status IN ('pending', 'applied', 'dropped')),
    CONSTRAINT provider_inbox_reason_check CHECK (
        (status = 'dropped') = (reason IS NOT NULL)
        AND (reason IS NULL OR reason IN ('duplicate', 'hash_mismatch', 'unknown_job', 'job_mismatch'))),
    CONSTRAINT provider_inbox_finished_check CHECK (
        (status = 'pending') = (finished_at IS NULL)
        AND (applied_by IS NULL OR applied_by IN ('handler', 'applier'))),
    CONSTRAINT provider_inbox_tenant_check CHECK ((job_id IS NULL) = (organization_id IS NULL)),
    CONSTRAINT provider_inbox_path_job_id_check CHECK (char_length(path_job_id) <= 255),
    CONSTRAINT provider_inbox_delivery_id_check CHECK (delivery_id <> '' AND octet_length(delivery_id) <= 255),
    CONSTRAINT provider_inbox_request_hash_check CHECK (request_hash ~ '^[0-9a-f]{64}$'),
    CONSTRAINT provider_inbox_body_status_check CHECK (body_status IN ('running', 'succeeded', 'failed')),
    CONSTRAINT provider_inbox_body_result_object CHECK (body_result IS NULL OR jsonb_typeof(body_result) = 'object'),
    CONSTRAINT provider_inbox_attempts_check CHECK (attempts >= 0)
);

-- The applier reads pending arrivals whose lease has passed, oldest lease
-- first; the pending gauge counts them.
CREATE INDEX provider_inbox_pending_idx ON agent.provider_inbox (lease_expires_at) WHERE status = 'pending';
-- The sweeper reads arrivals past their retention, oldest first.
CREATE INDEX provider_inbox_received_at_idx ON agent.provider_inbox (received_at);

-- The copies of an arrival, counted by the reason each was dropped for: one
-- row per arrival at most, however often the provider re-sends. A table of
-- its own so that counting a copy never waits for the apply of the arrival
-- (which holds the arrival's row lock until it commits): the foreign key
-- takes FOR KEY SHARE, which an apply's update does not conflict with.
CREATE TABLE agent.provider_inbox_copies (
    inbox_id        uuid        PRIMARY KEY REFERENCES agent.provider_inbox (id) ON DELETE CASCADE,
    duplicates      bigint      NOT NULL DEFAULT 0,
    hash_mismatches bigint      NOT NULL DEFAULT 0,
    path_mismatches bigint      NOT NULL DEFAULT 0,
    first_copy_at   timestamptz NOT NULL,
    last_copy_at    timestamptz NOT NULL,

    CONSTRAINT provider_inbox_copies_counts_check
        CHECK (duplicates >= 0 AND hash_mismatches >= 0 AND path_mismatches >= 0)
);

-- A stored delivery id arriving on another path is dropped as path_mismatch.
ALTER TABLE agent.webhook_drops DROP CONSTRAINT webhook_drops_reason_check;
ALTER TABLE agent.webhook_drops ADD CONSTRAINT webhook_drops_reason_check
    CHECK (reason IN ('duplicate', 'hash_mismatch', 'unknown_job', 'job_mismatch', 'path_mismatch'));

-- +goose Down
ALTER TABLE agent.webhook_drops DROP CONSTRAINT webhook_drops_reason_check;
DELETE FROM agent.webhook_drops WHERE reason = 'path_mismatch';
ALTER TABLE agent.webhook_drops ADD CONSTRAINT webhook_drops_reason_check
    CHECK (reason IN ('duplicate', 'hash_mismatch', 'unknown_job', 'job_mismatch'));
DROP TABLE agent.provider_inbox_copies;
DROP TABLE agent.provider_inbox;
