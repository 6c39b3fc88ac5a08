-- Cancelling a Run (POST /v1/runs/{id}/cancel; see runs.Store.Cancel and
-- dispatch/). A Run not yet handed to the runtime is cancelled at once and
-- its dispatch stopped (state cancelled), in one transaction; a Run the
-- runtime has gets a cancel request, a signed message delivered at least
-- once (agent.run_cancels, an outbox like agent.run_dispatches), and stays
-- as it is until the runtime reports cancelled.

-- +goose Up

-- On Citus, one connection per worker for the whole migration: the table
-- it distributes must see the DDL before it in this transaction (a no-op
-- setting on plain PostgreSQL).
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- When a cancel was first asked for; NULL for a Run nobody cancelled. Set
-- once: a repeated cancel changes nothing.
ALTER TABLE agent.runs ADD COLUMN cancel_requested_at timestamptz;

-- A dispatch stopped by a cancel before its Run was delivered: never
-- leased again (the lease takes pending rows alone), and the end of an
-- attempt in flight when it was stopped changes nothing (its fence asks
-- for pending). NOT VALID: every existing row passes the narrower check.
ALTER TABLE agent.run_dispatches DROP CONSTRAINT run_dispatches_state_check;
ALTER TABLE agent.run_dispatches ADD CONSTRAINT run_dispatches_state_check
    CHECK (state IN ('pending', 'dispatched', 'failed', 'cancelled')) NOT VALID;

-- One row per cancelled Run: who asked, why, and the delivery of the
-- cancel request to the runtime. state: pending (to deliver;
-- next_attempt_at says when), delivered (the runtime answered 2xx), failed
-- (a 4xx other than 408 and 429), skipped (nothing to deliver: the Run was
-- cancelled before any attempt to deliver it). The lease and its fence are
-- the dispatch's: leasing increments attempts and pushes next_attempt_at
-- one lease ahead; an attempt's end is written only while attempts holds
-- its number and the row is pending.
CREATE TABLE agent.run_cancels (
    run_id           uuid        NOT NULL,
    organization_id  uuid        NOT NULL,
    requested_at     timestamptz NOT NULL,
    requested_by     text,
    reason           text,
    state            text        NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    last_attempt_at  timestamptz,
    delivered_at     timestamptz,
    failed_at        timestamptz,
    last_status_code integer,
    last_error       text,

    CONSTRAINT run_cancels_pkey PRIMARY KEY (run_id, organization_id),
    CONSTRAINT run_cancels_state_check CHECK (state IN ('pending', 'delivered', 'failed', 'skipped')),
    CONSTRAINT run_cancels_attempts_check CHECK (attempts >= 0),
    CONSTRAINT run_cancels_delivered_check CHECK ((state = 'delivered') = (delivered_at IS NOT NULL)),
    CONSTRAINT run_cancels_failed_check CHECK ((state = 'failed') = (failed_at IS NOT NULL)),
    CONSTRAINT run_cancels_requested_by_check CHECK (requested_by IS NULL OR octet_length(requested_by) <= 255),
    CONSTRAINT run_cancels_reason_check CHECK (reason IS NULL OR char_length(reason) <= 500),
    CONSTRAINT run_cancels_last_error_check CHECK (last_error IS NULL OR char_length(last_error) <= 2000)
);

-- The dispatcher's lease pass over cancel requests, partial like
-- run_dispatches_due_idx.
CREATE INDEX run_cancels_due_idx ON agent.run_cancels (next_attempt_at) WHERE state = 'pending';

-- Distributed before its foreign key: Citus refuses a local table's key
-- to a distributed one.
SELECT agent.distribute_tenant_table('agent.run_cancels');
ALTER TABLE agent.run_cancels ADD CONSTRAINT run_cancels_run_fkey
    FOREIGN KEY (run_id, organization_id) REFERENCES agent.runs (id, organization_id) ON DELETE CASCADE;

-- +goose Down
DROP TABLE agent.run_cancels;
UPDATE agent.run_dispatches SET state = 'failed', failed_at = coalesce(last_attempt_at, created_at)
WHERE state = 'cancelled';
ALTER TABLE agent.run_dispatches DROP CONSTRAINT run_dispatches_state_check;
ALTER TABLE agent.run_dispatches ADD CONSTRAINT run_dispatches_state_check
    CHECK (state IN ('pending', 'dispatched', 'failed'));
ALTER TABLE agent.runs DROP COLUMN cancel_requested_at;
