-- The backlog of the outbox, counted cheaply. Every `searchd serve` counts
-- the pending dispatches and reads the age of the oldest one every 15 s,
-- for its metrics, its log and the console, whether or not it dispatches.
-- run_dispatches_due_idx orders them by next_attempt_at, which a retry
-- pushes ahead, so the oldest by admission was a read of every pending
-- row's heap tuple. This index, partial like it (dispatched rows, nearly
-- all of them, are not in it), answers the count and min(created_at) in
-- one index-only scan of the pending rows alone.
--
-- Built CONCURRENTLY, outside a transaction, so admissions (which insert
-- a pending row) are not held while it builds on a large table. A build
-- that fails leaves an invalid index behind: drop it
-- (DROP INDEX CONCURRENTLY agent.run_dispatches_pending_age_idx) and
-- migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS run_dispatches_pending_age_idx
    ON agent.run_dispatches (created_at) WHERE state = 'pending';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS agent.run_dispatches_pending_age_idx;
