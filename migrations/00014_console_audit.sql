-- What the console (see console/) shows that nothing recorded before: who
-- force-released a claim and why, and what each sweeper run did; plus the
-- indexes its per-organization lists read by.

-- +goose Up

-- One row per force-release of a stuck claim, by `searchd claims release`
-- or the console, written in the transaction that deletes the claim (see
-- operator/). The claim is gone afterwards, so its address and its lease
-- as they were read are copied here; the lease token, the fence, is not.
CREATE TABLE agent.claim_releases (
    id               uuid        PRIMARY KEY,
    claim_id         uuid        NOT NULL,
    organization_id  uuid        NOT NULL,
    scope            text        NOT NULL,
    key              text        NOT NULL,
    request_hash     text        NOT NULL,
    claimed_at       timestamptz NOT NULL,
    lease_expires_at timestamptz NOT NULL,
    -- Whether the lease was still live when the claim was released (the
    -- CLI allows it for a holder known to be gone; the console does not).
    lease_live       boolean     NOT NULL,
    actor            text        NOT NULL,
    reason           text        NOT NULL,
    via              text        NOT NULL,
    released_at      timestamptz NOT NULL,

    CONSTRAINT claim_releases_actor_check CHECK (actor <> '' AND octet_length(actor) <= 255),
    CONSTRAINT claim_releases_reason_check CHECK (reason <> '' AND char_length(reason) <= 500),
    CONSTRAINT claim_releases_via_check CHECK (via IN ('cli', 'console'))
);

CREATE INDEX claim_releases_released_idx ON agent.claim_releases (released_at DESC, id DESC);

-- One row per sweeper run (serve's in-process sweeper and `searchd sweep`),
-- written when the run ends. tables holds one object per table swept:
-- {"table", "read", "deleted", "passes", "duration_us", "backlog"}.
CREATE TABLE agent.sweeper_runs (
    id          uuid        PRIMARY KEY,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    via         text        NOT NULL,
    bound       integer     NOT NULL,
    max_passes  integer     NOT NULL,
    tables      jsonb       NOT NULL,
    backlog     boolean     NOT NULL,
    error       text,

    CONSTRAINT sweeper_runs_via_check CHECK (via IN ('serve', 'sweep')),
    CONSTRAINT sweeper_runs_tables_array CHECK (jsonb_typeof(tables) = 'array'),
    CONSTRAINT sweeper_runs_order_check CHECK (finished_at >= started_at)
);

CREATE INDEX sweeper_runs_finished_idx ON agent.sweeper_runs (finished_at DESC, id DESC);

-- Claims by the end of their lease: the console's in-flight claims (the
-- range after now, which holds almost only them) and stuck claims (walked
-- from the oldest lease, skipping completed rows). No predicate on status,
-- and no column a completion writes: a completion stays a HOT update, so
-- the claim path pays one index insert per claim and nothing more.
CREATE INDEX idempotency_keys_lease_idx ON agent.idempotency_keys (lease_expires_at, id);

-- The drops of one job, newest first (the console's job page).
CREATE INDEX webhook_drops_org_job_idx
    ON agent.webhook_drops (organization_id, path_job_id, received_at DESC, id DESC)
    WHERE organization_id IS NOT NULL;

-- An organization's provider jobs, newest first.
CREATE INDEX provider_jobs_org_created_idx
    ON agent.provider_jobs (organization_id, created_at DESC, id DESC);

-- +goose Down
DROP INDEX agent.idempotency_keys_lease_idx;
DROP INDEX agent.provider_jobs_org_created_idx;
DROP INDEX agent.webhook_drops_org_job_idx;
DROP TABLE agent.sweeper_runs;
DROP TABLE agent.claim_releases;
