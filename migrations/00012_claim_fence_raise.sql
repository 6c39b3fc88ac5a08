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

-- +goose Up
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
