-- Run events delivered to the product's webhook endpoints (issue 37.2;
-- docs/webhooks.md). Every table here is a tenant table: its keys start
-- with (or carry) organization_id, and it is distributed with the Runs.
--
-- A delivery is written by the very transaction that changes its Run (the
-- admission, a runtime's status report, the dispatcher's queued ->
-- dispatched): internal/runevents holds the one INSERT they share. So a
-- Run change that rolls back emits nothing, and an organization without
-- an enabled endpoint gets no row.

-- +goose Up

-- An organization's endpoint. secret is the Standard Webhooks signing key
-- (whsec_ + base64 of 32 random bytes): the server signs with it, so it is
-- kept, and shown to the organization on demand; never logged. event_types
-- NULL subscribes to every type. failing_since is the start of the current
-- run of failed attempts (NULL after a delivery): an endpoint failing for
-- longer than the window (SEARCHD_WEBHOOK_DISABLE_AFTER) is disabled.
CREATE TABLE agent.webhook_endpoints (
    organization_id uuid        NOT NULL,
    id              uuid        NOT NULL,
    url             text        NOT NULL,
    description     text        NOT NULL DEFAULT '',
    event_types     text[],
    secret          text        NOT NULL,
    state           text        NOT NULL DEFAULT 'enabled',
    disabled_reason text,
    disabled_at     timestamptz,
    failing_since   timestamptz,
    created_at      timestamptz NOT NULL,
    created_by      text        NOT NULL,
    updated_at      timestamptz NOT NULL,

    CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (organization_id, id),
    CONSTRAINT webhook_endpoints_state_check CHECK (state IN ('enabled', 'disabled')),
    CONSTRAINT webhook_endpoints_disabled_check CHECK ((state = 'disabled') = (disabled_at IS NOT NULL)),
    CONSTRAINT webhook_endpoints_url_check CHECK (url ~ '^https?://' AND octet_length(url) <= 2048),
    CONSTRAINT webhook_endpoints_description_check CHECK (char_length(description) <= 500),
    CONSTRAINT webhook_endpoints_secret_check CHECK (secret ~ '^whsec_'),
    CONSTRAINT webhook_endpoints_reason_check CHECK (disabled_reason IS NULL OR char_length(disabled_reason) <= 500),
    CONSTRAINT webhook_endpoints_created_by_check CHECK (created_by <> '' AND octet_length(created_by) <= 255)
);

-- The outbox: one row per (endpoint, Run event), the event's fields copied
-- from the Run as the change left it, so a delivery needs no other read.
-- seq is the Run's version after the change (1: admitted).
--
-- state: pending (to deliver; next_attempt_at says when), delivered (the
-- endpoint answered 2xx). attempts counts the leases taken and is each
-- attempt's fence, as in agent.run_dispatches (00016). A delivery of an
-- endpoint that is disabled stays pending, and is not leased until the
-- endpoint is enabled again.
CREATE TABLE agent.webhook_deliveries (
    organization_id  uuid        NOT NULL,
    endpoint_id      uuid        NOT NULL,
    run_id           uuid        NOT NULL,
    seq              bigint      NOT NULL,
    type             text        NOT NULL,
    status           text        NOT NULL,
    occurred_at      timestamptz NOT NULL,
    result_ref       text,
    error_code       text,
    error_message    text,
    state            text        NOT NULL DEFAULT 'pending',
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    last_attempt_at  timestamptz,
    delivered_at     timestamptz,
    last_status_code integer,
    last_error       text,

    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (organization_id, endpoint_id, run_id, seq),
    CONSTRAINT webhook_deliveries_endpoint_fkey FOREIGN KEY (organization_id, endpoint_id)
        REFERENCES agent.webhook_endpoints (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_run_fkey FOREIGN KEY (run_id, organization_id)
        REFERENCES agent.runs (id, organization_id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_state_check CHECK (state IN ('pending', 'delivered')),
    CONSTRAINT webhook_deliveries_delivered_check CHECK ((state = 'delivered') = (delivered_at IS NOT NULL)),
    CONSTRAINT webhook_deliveries_seq_check CHECK (seq >= 1),
    CONSTRAINT webhook_deliveries_attempts_check CHECK (attempts >= 0),
    CONSTRAINT webhook_deliveries_last_error_check CHECK (last_error IS NULL OR char_length(last_error) <= 2000)
);

-- The worker's lease pass: pending rows by when they are due.
CREATE INDEX webhook_deliveries_due_idx ON agent.webhook_deliveries (next_attempt_at) WHERE state = 'pending';
-- The cascade from a Run, and the order check (no earlier pending seq of
-- the same Run and endpoint).
CREATE INDEX webhook_deliveries_run_idx ON agent.webhook_deliveries (organization_id, run_id, endpoint_id, seq);
-- An endpoint's recent deliveries, newest first.
CREATE INDEX webhook_deliveries_endpoint_created_idx
    ON agent.webhook_deliveries (organization_id, endpoint_id, created_at DESC);

-- One row per attempt, written in_flight by the lease and ended with the
-- answer; only the newest webhooks.KeptAttempts of a delivery are kept.
CREATE TABLE agent.webhook_delivery_attempts (
    organization_id uuid        NOT NULL,
    endpoint_id     uuid        NOT NULL,
    run_id          uuid        NOT NULL,
    seq             bigint      NOT NULL,
    attempt         integer     NOT NULL,
    started_at      timestamptz NOT NULL,
    ended_at        timestamptz,
    outcome         text        NOT NULL DEFAULT 'in_flight',
    status_code     integer,
    duration_us     bigint,
    answer          text,

    CONSTRAINT webhook_delivery_attempts_pkey PRIMARY KEY (organization_id, endpoint_id, run_id, seq, attempt),
    CONSTRAINT webhook_delivery_attempts_delivery_fkey FOREIGN KEY (organization_id, endpoint_id, run_id, seq)
        REFERENCES agent.webhook_deliveries (organization_id, endpoint_id, run_id, seq) ON DELETE CASCADE,
    CONSTRAINT webhook_delivery_attempts_outcome_check CHECK (outcome IN ('in_flight', 'delivered', 'retry')),
    CONSTRAINT webhook_delivery_attempts_ended_check CHECK ((outcome = 'in_flight') = (ended_at IS NULL)),
    CONSTRAINT webhook_delivery_attempts_answer_check CHECK (answer IS NULL OR char_length(answer) <= 2000)
);

SELECT agent.distribute_tenant_table('agent.webhook_endpoints');
SELECT agent.distribute_tenant_table('agent.webhook_deliveries');
SELECT agent.distribute_tenant_table('agent.webhook_delivery_attempts');

-- +goose Down
DROP TABLE agent.webhook_delivery_attempts;
DROP TABLE agent.webhook_deliveries;
DROP TABLE agent.webhook_endpoints;
