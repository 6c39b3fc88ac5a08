-- The sweeper's probe for a claim that still holds a snapshot (a retained
-- surface.saved_search.start claim whose resource is the snapshot: see
-- snapshotDeletable in sweeper/queries.go) found its claim through
-- idempotency_keys_org_scope_key_key, which narrows to the organization
-- and the scope and then filters resource_id: every snapshot it judged
-- read every retained start claim of its organization. On 1,000,000
-- starts one pass did not finish in a minute (docs/benchmarks.md, "A
-- large database"). This index answers the probe in one lookup.
--
-- Partial: a claim names a resource once completed, and only those are
-- probed. Resource ids of snapshots are time-ordered (UUIDv7), so within
-- an organization new entries land at the right edge.
--
-- Built CONCURRENTLY, outside a transaction, so claims are not held while
-- it builds on a large table. A build that fails leaves an invalid index
-- behind: drop it (DROP INDEX CONCURRENTLY
-- agent.idempotency_keys_resource_idx) and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_resource_idx
    ON agent.idempotency_keys (organization_id, resource_id) WHERE resource_id IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS agent.idempotency_keys_resource_idx;
