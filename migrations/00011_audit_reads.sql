-- Indexes for the audit reads of the HTTP API (issue 15): the drops of one
-- provider job (GET /v1/provider-jobs/{id}/drops) and the archived saved
-- searches of an organization (GET /v1/saved-searches?archived=true).
-- Both reads were possible before by scanning; these keep them bounded by
-- what they return.

-- +goose Up

-- A job's drops, newest first: a drop names its job by the callback path's
-- {job_id} (searchd's job id, as text) and carries the organization the job
-- resolved to. unknown_job drops (no organization) are never read here.
CREATE INDEX webhook_drops_org_job_received_idx
    ON agent.webhook_drops (organization_id, provider, path_job_id, received_at DESC, id DESC)
    WHERE organization_id IS NOT NULL;

-- The archived saved searches of an organization, newest first by creation,
-- beside saved_searches_org_created_idx, which serves the live ones.
CREATE INDEX saved_searches_org_archived_created_idx
    ON agent.saved_searches (organization_id, created_at DESC, id DESC)
    WHERE archived_at IS NOT NULL;

-- +goose Down
DROP INDEX agent.saved_searches_org_archived_created_idx;
DROP INDEX agent.webhook_drops_org_job_received_idx;
