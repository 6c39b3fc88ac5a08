-- The hand-off of an admitted Run to the runtime that executes it, and the
-- status the runtime reports back. See dispatch/ (the outbox and its
-- dispatcher) and runs/ (admission writes the outbox row; status reports).
--
-- Every table here is a tenant table: its keys carry organization_id, and
-- each hangs off agent.runs by (organization_id, run id) with ON DELETE
-- CASCADE, so a Run's dispatch, its attempts and its status history are
-- swept with the Run (sweeper/, after 396 days) and never outlive it.

-- +goose Up

-- A Run's status moves forward only: queued -> dispatched (the runtime
-- acknowledged the delivery) -> running -> succeeded | failed | cancelled,
-- and may skip steps (a runtime reporting succeeded without running). The
-- status, its version and updated_at are set by the dispatcher (queued ->
-- dispatched) and by the runtime's reports; version grows by one on every
-- change, so a report that changes nothing is visible as such.
-- updated_at is NULL until the first change (the Run reads created_at
-- then), so existing rows need no rewrite.
ALTER TABLE agent.runs
    ADD COLUMN version       bigint NOT NULL DEFAULT 1,
    ADD COLUMN updated_at    timestamptz,
    ADD COLUMN result_ref    text,
    ADD COLUMN error_code    text,
    ADD COLUMN error_message text;

-- NOT VALID: every existing row passed the narrower check this one
-- replaces, and the new columns are NULL or 1 on all of them, so a
-- validating scan of agent.runs under its lock would find nothing. New and
-- updated rows are checked all the same.
ALTER TABLE agent.runs DROP CONSTRAINT runs_status_check;
ALTER TABLE agent.runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('queued', 'dispatched', 'running', 'succeeded', 'failed', 'cancelled')) NOT VALID;
ALTER TABLE agent.runs ADD CONSTRAINT runs_version_check CHECK (version >= 1) NOT VALID;
ALTER TABLE agent.runs ADD CONSTRAINT runs_updated_check
    CHECK (updated_at IS NULL OR updated_at >= created_at) NOT VALID;
-- A result reference belongs to a succeeded Run; an error to a failed or
-- cancelled one. The limits are runs.MaxResultRefBytes and friends.
ALTER TABLE agent.runs ADD CONSTRAINT runs_result_ref_check
    CHECK (result_ref IS NULL OR (status = 'succeeded' AND result_ref <> '' AND octet_length(result_ref) <= 2048)) NOT VALID;
ALTER TABLE agent.runs ADD CONSTRAINT runs_error_check
    CHECK ((error_code IS NULL AND error_message IS NULL) OR (
        status IN ('failed', 'cancelled') AND error_code ~ '^[a-z0-9][a-z0-9_.-]{0,99}$'
        AND (error_message IS NULL OR char_length(error_message) <= 2000))) NOT VALID;

-- The outbox: one row per admitted Run, inserted by the very statement that
-- inserts the Run (runs.runInsert), so no admitted Run lacks one and none
-- exists for a Run that was not admitted.
--
-- state: pending (to deliver; next_attempt_at says when), dispatched (the
-- runtime answered 2xx), failed (it answered a 4xx other than 408 and 429:
-- retrying cannot help; a person looks, and may retry it).
--
-- attempts counts the leases taken: a dispatcher leases a pending row by
-- incrementing attempts and pushing next_attempt_at one lease ahead, so the
-- attempt number is the lease's fence. The end of an attempt is written
-- only while attempts still holds its number and the row is pending: a
-- dispatcher that stalled past its lease, whose row another has leased
-- since, changes nothing.
CREATE TABLE agent.run_dispatches (
    run_id           uuid        NOT NULL,
    organization_id  uuid        NOT NULL,
    state            text        NOT NULL DEFAULT 'pending',
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    last_attempt_at  timestamptz,
    dispatched_at    timestamptz,
    failed_at        timestamptz,
    -- The last answer: the HTTP status (NULL for a timeout or a cut
    -- connection) and what went wrong, for a person.
    last_status_code integer,
    last_error       text,
    -- Operator retries of a failed dispatch (agent.run_dispatch_retries).
    retries          integer     NOT NULL DEFAULT 0,

    CONSTRAINT run_dispatches_pkey PRIMARY KEY (run_id, organization_id),
    CONSTRAINT run_dispatches_run_fkey
        FOREIGN KEY (run_id, organization_id) REFERENCES agent.runs (id, organization_id) ON DELETE CASCADE,
    CONSTRAINT run_dispatches_state_check CHECK (state IN ('pending', 'dispatched', 'failed')),
    CONSTRAINT run_dispatches_attempts_check CHECK (attempts >= 0 AND retries >= 0),
    CONSTRAINT run_dispatches_dispatched_check CHECK ((state = 'dispatched') = (dispatched_at IS NOT NULL)),
    CONSTRAINT run_dispatches_failed_check CHECK ((state = 'failed') = (failed_at IS NOT NULL)),
    CONSTRAINT run_dispatches_last_error_check CHECK (last_error IS NULL OR char_length(last_error) <= 2000)
);

-- The dispatcher's lease pass: pending rows by when they are due. Partial,
-- so dispatched rows (nearly all) cost it nothing.
CREATE INDEX run_dispatches_due_idx ON agent.run_dispatches (next_attempt_at) WHERE state = 'pending';
-- `searchd runs dispatch list`: the failed dispatches, newest first.
CREATE INDEX run_dispatches_failed_idx ON agent.run_dispatches (failed_at DESC) WHERE state = 'failed';

-- The Runs admitted before this migration were never handed off: each
-- queued one gets its pending dispatch, so no admitted Run lacks one. They
-- are delivered once a runtime is configured (SEARCHD_RUNTIME_URL).
INSERT INTO agent.run_dispatches (run_id, organization_id, next_attempt_at, created_at)
SELECT r.id, r.organization_id, now(), r.created_at
FROM agent.runs r
WHERE r.status = 'queued';

-- One row per delivery attempt: written as in_flight by the lease, ended by
-- the dispatcher with the answer. An attempt left in_flight after its lease
-- passed was cut short (the replica died or stalled). Only the newest
-- dispatch.KeptAttempts attempts of a dispatch are kept; the dispatch row
-- counts them all.
CREATE TABLE agent.run_dispatch_attempts (
    run_id          uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    attempt         integer     NOT NULL,
    started_at      timestamptz NOT NULL,
    ended_at        timestamptz,
    outcome         text        NOT NULL DEFAULT 'in_flight',
    status_code     integer,
    -- What went wrong (a timeout, a cut connection), or the start of the
    -- runtime's answer, for a person.
    answer          text,

    CONSTRAINT run_dispatch_attempts_pkey PRIMARY KEY (run_id, attempt, organization_id),
    CONSTRAINT run_dispatch_attempts_dispatch_fkey
        FOREIGN KEY (run_id, organization_id) REFERENCES agent.run_dispatches (run_id, organization_id) ON DELETE CASCADE,
    CONSTRAINT run_dispatch_attempts_outcome_check
        CHECK (outcome IN ('in_flight', 'delivered', 'retry', 'failed')),
    CONSTRAINT run_dispatch_attempts_ended_check CHECK ((outcome = 'in_flight') = (ended_at IS NULL)),
    CONSTRAINT run_dispatch_attempts_answer_check CHECK (answer IS NULL OR char_length(answer) <= 2000)
);

-- An operator's retry of a failed dispatch (`searchd runs dispatch retry`):
-- who, why, and the answer that had failed it.
CREATE TABLE agent.run_dispatch_retries (
    id                   uuid        NOT NULL,
    run_id               uuid        NOT NULL,
    organization_id      uuid        NOT NULL,
    actor                text        NOT NULL,
    reason               text        NOT NULL,
    retried_at           timestamptz NOT NULL,
    previous_status_code integer,
    previous_error       text,

    CONSTRAINT run_dispatch_retries_pkey PRIMARY KEY (id, organization_id),
    CONSTRAINT run_dispatch_retries_dispatch_fkey
        FOREIGN KEY (run_id, organization_id) REFERENCES agent.run_dispatches (run_id, organization_id) ON DELETE CASCADE,
    CONSTRAINT run_dispatch_retries_actor_check CHECK (actor <> '' AND octet_length(actor) <= 255),
    CONSTRAINT run_dispatch_retries_reason_check CHECK (reason <> '' AND char_length(reason) <= 500)
);

-- A dispatch's retries; it also serves the cascade.
CREATE INDEX run_dispatch_retries_run_idx ON agent.run_dispatch_retries (run_id, organization_id, retried_at);

-- Every change of a Run's status after its admission, keyed by the version
-- it made: the dispatcher's queued -> dispatched (reported_by NULL) and each
-- runtime report that changed something (reported_by: the runtime
-- credential's sub). A report that changes nothing writes nothing.
CREATE TABLE agent.run_status_changes (
    run_id          uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    version         bigint      NOT NULL,
    status          text        NOT NULL,
    changed_at      timestamptz NOT NULL,
    reported_by     text,
    result_ref      text,
    error_code      text,
    error_message   text,

    CONSTRAINT run_status_changes_pkey PRIMARY KEY (run_id, version, organization_id),
    CONSTRAINT run_status_changes_run_fkey
        FOREIGN KEY (run_id, organization_id) REFERENCES agent.runs (id, organization_id) ON DELETE CASCADE,
    CONSTRAINT run_status_changes_status_check
        CHECK (status IN ('dispatched', 'running', 'succeeded', 'failed', 'cancelled')),
    CONSTRAINT run_status_changes_version_check CHECK (version >= 2)
);

-- +goose Down
DROP TABLE agent.run_status_changes;
DROP TABLE agent.run_dispatch_retries;
DROP TABLE agent.run_dispatch_attempts;
DROP TABLE agent.run_dispatches;
ALTER TABLE agent.runs DROP CONSTRAINT runs_error_check;
ALTER TABLE agent.runs DROP CONSTRAINT runs_result_ref_check;
ALTER TABLE agent.runs DROP CONSTRAINT runs_updated_check;
ALTER TABLE agent.runs DROP CONSTRAINT runs_version_check;
ALTER TABLE agent.runs DROP CONSTRAINT runs_status_check;
UPDATE agent.runs SET status = 'queued' WHERE status = 'dispatched';
ALTER TABLE agent.runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled'));
ALTER TABLE agent.runs
    DROP COLUMN error_message,
    DROP COLUMN error_code,
    DROP COLUMN result_ref,
    DROP COLUMN updated_at,
    DROP COLUMN version;
