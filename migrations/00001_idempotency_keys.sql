-- The idempotency plane: one durable table that every effect passes through.
-- See idempotency/doc.go for the semantics each column serves.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS agent;

CREATE TABLE agent.idempotency_keys (
    id               uuid        PRIMARY KEY,
    organization_id  uuid        NOT NULL,
    scope            text        NOT NULL,
    key              text        NOT NULL,
    request_hash     text        NOT NULL,
    status           text        NOT NULL,
    -- The fence: a new value on every claim and reclaim. complete and release
    -- are conditional on it, so a worker whose lease moved on writes nothing.
    lease_token      uuid        NOT NULL,
    resource_type    text,
    resource_id      text,
    response         jsonb,
    claimed_at       timestamptz NOT NULL,
    -- Two clocks: the lease says who may work on the key (short), the
    -- retention how long the answer is remembered (long).
    lease_expires_at timestamptz NOT NULL,
    retain_until     timestamptz NOT NULL,

    CONSTRAINT idempotency_keys_org_scope_key_key UNIQUE (organization_id, scope, key),
    CONSTRAINT idempotency_keys_status_check CHECK (status IN ('processing', 'completed')),
    CONSTRAINT idempotency_keys_scope_check CHECK (scope <> ''),
    CONSTRAINT idempotency_keys_key_check CHECK (key <> '' AND octet_length(key) <= 255),
    CONSTRAINT idempotency_keys_request_hash_check CHECK (request_hash <> ''),
    CONSTRAINT idempotency_keys_retention_covers_lease CHECK (retain_until >= lease_expires_at),
    CONSTRAINT idempotency_keys_response_object CHECK (response IS NULL OR jsonb_typeof(response) = 'object'),
    -- A completion that records neither replays an empty success.
    CONSTRAINT idempotency_keys_completed_has_answer
        CHECK (status <> 'completed' OR response IS NOT NULL OR resource_id IS NOT NULL),
    -- A resource is named by its type and its id together.
    CONSTRAINT idempotency_keys_resource_named
        CHECK ((resource_type IS NULL) = (resource_id IS NULL))
);

-- The sweeper reads expired claims oldest first.
CREATE INDEX idempotency_keys_retain_until_idx ON agent.idempotency_keys (retain_until);

-- +goose Down
DROP TABLE agent.idempotency_keys;
