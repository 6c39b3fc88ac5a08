-- Retention: the indexes the sweeper (see sweeper/) needs so that each of its
-- bounded passes reads its batch from an index instead of scanning a table.
-- agent.idempotency_keys already has its retain_until index (00001).

-- +goose Up

-- The Run retention pass reads Runs past retain_until, oldest first.
CREATE INDEX runs_retain_until_idx ON agent.runs (retain_until);

-- "Does any Run refer to this snapshot?": asked by the snapshot retention
-- pass for every candidate, and by the runs_snapshot_fkey check on every
-- snapshot delete, which would otherwise scan agent.runs once per snapshot.
CREATE INDEX runs_snapshot_idx ON agent.runs (snapshot_id) WHERE snapshot_id IS NOT NULL;

-- The snapshot retention pass reads snapshots oldest first.
CREATE INDEX saved_search_snapshots_created_idx ON agent.saved_search_snapshots (created_at);

-- +goose Down
DROP INDEX agent.saved_search_snapshots_created_idx;
DROP INDEX agent.runs_snapshot_idx;
DROP INDEX agent.runs_retain_until_idx;
