-- The claim a snapshot answers. A saved-search start freezes its snapshot
-- and completes its claim in one transaction, so the claim that names a
-- snapshot is known when the snapshot is written. The sweeper asks of
-- every candidate snapshot whether a retained claim still names it; by
-- this column that is one lookup of the claim's primary key, where before
-- it was a scan of every start claim of the snapshot's organization (the
-- claims' only index that starts with the organization is by key), which
-- on an organization of 500,000 retained claims took the pass minutes.
--
-- Nullable, and not backfilled (snapshots are immutable): rows written
-- before it, or by a replica of the previous release during a rolling
-- upgrade, keep the old probe (see sweeper/queries.go). Adding a nullable
-- column without a default is a change of the catalog alone.

-- +goose Up
ALTER TABLE agent.saved_search_snapshots ADD COLUMN claim_id uuid;

-- +goose Down
ALTER TABLE agent.saved_search_snapshots DROP COLUMN claim_id;
