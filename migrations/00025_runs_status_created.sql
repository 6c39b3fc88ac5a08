-- GET /v1/runs filters by status (issue 37.5). Without an index that
-- leads with the status, a page of a rare status (the queued, dispatched
-- or running Runs of an organization whose Runs have mostly succeeded)
-- walks runs_org_created_idx through every Run of the organization that
-- does not match, and a page past the last match reads them all. This
-- index answers a status's page, and a created_at range of it, with one
-- seek and the page's rows.
--
-- Its cost: status is indexed now, so a status change (at most three per
-- Run) is no longer a heap-only update and writes an entry in each of the
-- table's indexes.
--
-- Built CONCURRENTLY, outside a transaction, so admissions are not held
-- while it builds on a large table. A build that fails leaves an invalid
-- index behind: drop it (DROP INDEX CONCURRENTLY agent.runs_org_status_created_idx)
-- and migrate again.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_org_status_created_idx
    ON agent.runs (organization_id, status, created_at DESC, id DESC);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS agent.runs_org_status_created_idx;
