-- Wake waiters when a saved-search preparation ends.
--
-- A start that meets a live preparation may wait for it (Prefer: wait=N)
-- instead of answering 409. It LISTENs on searchd_claim_ended and is woken
-- when the claim completes or is released (deleted while processing). The
-- notification is sent at commit, so a waiter never wakes before the answer
-- is visible. The payload is md5(organization_id/scope/key): fixed size,
-- whatever the key.
--
-- Only surface.saved_search.start notifies: NOTIFY serialises the commits of
-- notifying transactions on one lock, and no other scope has waiters.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION agent.idempotency_keys_notify_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('searchd_claim_ended',
        md5(OLD.organization_id::text || '/' || OLD.scope || '/' || OLD.key));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER idempotency_keys_completed_notify
    AFTER UPDATE OF status ON agent.idempotency_keys
    FOR EACH ROW
    WHEN (OLD.scope = 'surface.saved_search.start'
          AND OLD.status = 'processing' AND NEW.status = 'completed')
    EXECUTE FUNCTION agent.idempotency_keys_notify_ended();

CREATE TRIGGER idempotency_keys_released_notify
    AFTER DELETE ON agent.idempotency_keys
    FOR EACH ROW
    WHEN (OLD.scope = 'surface.saved_search.start' AND OLD.status = 'processing')
    EXECUTE FUNCTION agent.idempotency_keys_notify_ended();

-- +goose Down
DROP TRIGGER idempotency_keys_released_notify ON agent.idempotency_keys;
DROP TRIGGER idempotency_keys_completed_notify ON agent.idempotency_keys;
DROP FUNCTION agent.idempotency_keys_notify_ended();
