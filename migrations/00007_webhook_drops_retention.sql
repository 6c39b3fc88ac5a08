-- Retention of the drop audit: agent.webhook_drops keeps each dropped
-- provider delivery for providerjobs.DropRetention (30 days) after it was
-- received, then the sweeper deletes it in bounded passes like the other
-- tables it sweeps. Its pass reads the oldest drops first, by this index.

-- +goose Up
CREATE INDEX webhook_drops_received_at_idx ON agent.webhook_drops (received_at);

-- +goose Down
DROP INDEX agent.webhook_drops_received_at_idx;
