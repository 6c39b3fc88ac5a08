-- A fenced completion that fails, for completions pipelined with other writes.
--
-- A saved-search start completes its claim and admits its Run in one
-- transaction whose statements and COMMIT travel in one round trip (a pgx
-- batch). Go cannot look at the completion's answer before the COMMIT is
-- sent, so the database must refuse to commit when the fence moved on: the
-- fenced completion calls this function when it updated no row, the error
-- aborts the transaction, and the server skips the COMMIT and everything
-- else queued after it. The caller reads SQLSTATE SD409 as "the lease moved
-- on" (idempotency.ErrFenceLost), never as a failure to retry.

-- A completion notifies only a claim someone waits for.
--
-- NOTIFY serialises the commits of notifying transactions on one
-- database-wide lock held until the commit is flushed (00005), so with
-- every saved-search completion notifying, new starts on a durable server
-- went one WAL flush at a time, however many clients started them. Most
-- preparations have nobody waiting (a waiter is a double click that sent
-- Prefer: wait), so a waiter now marks the claim it waits for (waited),
-- and only a marked claim's completion notifies. The mark is an UPDATE of
-- the claim row, so it and the completion are ordered by the row lock: a
-- mark that commits first is seen by the completion (OLD.waited), and a
-- mark that comes after the completion waits for its commit and then finds
-- the claim completed, so the waiter reads the answer instead of waiting.
-- A release (rare: a retryable failure) still notifies unconditionally.

-- +goose Up
ALTER TABLE agent.idempotency_keys ADD COLUMN waited boolean NOT NULL DEFAULT false;

DROP TRIGGER idempotency_keys_completed_notify ON agent.idempotency_keys;
CREATE TRIGGER idempotency_keys_completed_notify
    AFTER UPDATE OF status ON agent.idempotency_keys
    FOR EACH ROW
    WHEN (OLD.scope = 'surface.saved_search.start'
          AND OLD.status = 'processing' AND NEW.status = 'completed'
          AND OLD.waited)
    EXECUTE FUNCTION agent.idempotency_keys_notify_ended();

-- +goose StatementBegin
CREATE FUNCTION agent.idempotency_fence_lost(claim_id uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'idempotency: the lease of claim % moved on', claim_id
        USING ERRCODE = 'SD409';
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION agent.idempotency_fence_lost(uuid);

DROP TRIGGER idempotency_keys_completed_notify ON agent.idempotency_keys;
CREATE TRIGGER idempotency_keys_completed_notify
    AFTER UPDATE OF status ON agent.idempotency_keys
    FOR EACH ROW
    WHEN (OLD.scope = 'surface.saved_search.start'
          AND OLD.status = 'processing' AND NEW.status = 'completed')
    EXECUTE FUNCTION agent.idempotency_keys_notify_ended();

ALTER TABLE agent.idempotency_keys DROP COLUMN waited;
