-- Saved searches (the mutable product tables), their immutable snapshots, and
-- agent.runs, whose unique (organization_id, start_key) index is Run
-- admission. See savedsearch/, snapshot/, runs/ and admission/.

-- +goose Up

-- A saved search's brief. Archiving hides it from reads and starts but keeps
-- the row, because snapshots and Runs refer to it.
--
-- version grows by one on every change to the brief, the name, the baseline
-- (which lives in another table) or the archive flag, in the transaction that
-- makes the change. Every writer updates this row first, so its row lock
-- orders all changes of one saved search.
CREATE TABLE agent.saved_searches (
    id              uuid        PRIMARY KEY,
    organization_id uuid        NOT NULL,
    name            text        NOT NULL,
    brief           jsonb       NOT NULL,
    version         bigint      NOT NULL DEFAULT 1,
    created_by      text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    archived_at     timestamptz,

    -- The target of the tenant-checked foreign keys below.
    CONSTRAINT saved_searches_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT saved_searches_name_check CHECK (name <> '' AND char_length(name) <= 200),
    CONSTRAINT saved_searches_brief_object CHECK (jsonb_typeof(brief) = 'object'),
    CONSTRAINT saved_searches_version_check CHECK (version >= 1)
);

-- Newest first, for cursor pagination over the live saved searches.
CREATE INDEX saved_searches_org_created_idx
    ON agent.saved_searches (organization_id, created_at DESC, id DESC)
    WHERE archived_at IS NULL;

-- The baseline: the results already seen. It changes on its own schedule,
-- apart from the brief, which is why a start must freeze both together.
CREATE TABLE agent.saved_search_baselines (
    saved_search_id uuid        PRIMARY KEY REFERENCES agent.saved_searches (id),
    items           text[]      NOT NULL DEFAULT '{}',
    cursor          text,
    updated_at      timestamptz NOT NULL,

    CONSTRAINT saved_search_baselines_items_check
        CHECK (cardinality(items) <= 10000 AND array_position(items, NULL) IS NULL)
);

-- The frozen input of saved-search Runs: brief and baseline as they were at
-- one instant, with the version they had then. A snapshot never changes (the
-- trigger below refuses UPDATE) and outlives its saved search's archive; the
-- foreign key from agent.runs keeps it while a Run refers to it.
CREATE TABLE agent.saved_search_snapshots (
    id                   uuid        PRIMARY KEY,
    organization_id      uuid        NOT NULL,
    saved_search_id      uuid        NOT NULL,
    saved_search_version bigint      NOT NULL,
    -- The saved search's name at the freeze; it names the Run.
    saved_search_name    text        NOT NULL,
    brief                jsonb       NOT NULL,
    baseline             jsonb       NOT NULL,
    -- Hex SHA-256 of the canonical JSON of {"baseline": ..., "brief": ...}.
    content_hash         text        NOT NULL,
    created_by           text,
    created_at           timestamptz NOT NULL,

    CONSTRAINT saved_search_snapshots_org_search_id_key UNIQUE (organization_id, saved_search_id, id),
    CONSTRAINT saved_search_snapshots_saved_search_fkey
        FOREIGN KEY (organization_id, saved_search_id)
        REFERENCES agent.saved_searches (organization_id, id),
    CONSTRAINT saved_search_snapshots_brief_object CHECK (jsonb_typeof(brief) = 'object'),
    CONSTRAINT saved_search_snapshots_baseline_object CHECK (jsonb_typeof(baseline) = 'object'),
    CONSTRAINT saved_search_snapshots_content_hash_check CHECK (content_hash ~ '^[0-9a-f]{64}$'),
    CONSTRAINT saved_search_snapshots_version_check CHECK (saved_search_version >= 1)
);

-- The audit trail of one saved search, newest first.
CREATE INDEX saved_search_snapshots_search_created_idx
    ON agent.saved_search_snapshots (organization_id, saved_search_id, created_at DESC, id DESC);

-- +goose StatementBegin
CREATE FUNCTION agent.saved_search_snapshots_refuse_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'agent.saved_search_snapshots rows are immutable'
        USING ERRCODE = 'object_not_in_prerequisite_state';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER saved_search_snapshots_immutable
    BEFORE UPDATE ON agent.saved_search_snapshots
    FOR EACH ROW EXECUTE FUNCTION agent.saved_search_snapshots_refuse_update();

-- Runs. The unique (organization_id, start_key) constraint IS admission: the
-- insert of a Run is its claim, and agent.idempotency_keys plays no part.
-- Start keys carry their namespace ("saved_search:" or "direct:"), so one
-- Idempotency-Key used on both surfaces names two different Runs.
-- request_hash makes a reused key with a different request detectable.
-- retain_until is created_at + 396 days: within it the start key replays the
-- Run.
CREATE TABLE agent.runs (
    id              uuid        PRIMARY KEY,
    organization_id uuid        NOT NULL,
    kind            text        NOT NULL,
    start_key       text        NOT NULL,
    request_hash    text        NOT NULL,
    saved_search_id uuid,
    snapshot_id     uuid,
    name            text,
    status          text        NOT NULL DEFAULT 'queued',
    options         jsonb,
    input           jsonb,
    created_by      text,
    created_at      timestamptz NOT NULL,
    retain_until    timestamptz NOT NULL,

    CONSTRAINT runs_org_start_key_key UNIQUE (organization_id, start_key),
    -- A saved-search Run's snapshot belongs to its saved search and its
    -- organization. MATCH SIMPLE: direct Runs (both NULL) are not checked.
    CONSTRAINT runs_snapshot_fkey
        FOREIGN KEY (organization_id, saved_search_id, snapshot_id)
        REFERENCES agent.saved_search_snapshots (organization_id, saved_search_id, id),
    CONSTRAINT runs_kind_check CHECK (kind IN ('saved_search', 'capability', 'definition')),
    CONSTRAINT runs_status_check CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    CONSTRAINT runs_start_key_check CHECK (start_key <> '' AND octet_length(start_key) <= 300),
    CONSTRAINT runs_request_hash_check CHECK (request_hash <> ''),
    CONSTRAINT runs_saved_search_shape CHECK (
        kind <> 'saved_search' OR (
            saved_search_id IS NOT NULL AND snapshot_id IS NOT NULL AND input IS NULL
            AND starts_with(start_key, 'saved_search:'))),
    CONSTRAINT runs_direct_shape CHECK (
        kind = 'saved_search' OR (
            saved_search_id IS NULL AND snapshot_id IS NULL AND name IS NOT NULL
            AND starts_with(start_key, 'direct:'))),
    CONSTRAINT runs_options_object CHECK (options IS NULL OR jsonb_typeof(options) = 'object'),
    CONSTRAINT runs_retention_check CHECK (retain_until > created_at)
);

-- Newest first, per organization and per saved search.
CREATE INDEX runs_org_created_idx ON agent.runs (organization_id, created_at DESC, id DESC);
CREATE INDEX runs_org_saved_search_created_idx
    ON agent.runs (organization_id, saved_search_id, created_at DESC, id DESC);

-- +goose Down
DROP TABLE agent.runs;
DROP TABLE agent.saved_search_snapshots;
DROP FUNCTION agent.saved_search_snapshots_refuse_update();
DROP TABLE agent.saved_search_baselines;
DROP TABLE agent.saved_searches;
