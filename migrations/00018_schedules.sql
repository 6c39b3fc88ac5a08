-- Scheduled starts: a saved search may carry a schedule, and every time it
-- comes due is one occurrence, started by the drain every `searchd serve`
-- runs (see schedule/). A snapshot records whether a client or the
-- scheduler started it.

-- +goose Up

-- One schedule per saved search: an interval or a cron expression, read in
-- a time zone, from a start time. next_due_at is the next occurrence the
-- drain has not yet written; NULL while the schedule is paused or has no
-- further occurrence (its saved search was archived). Every writer of a
-- schedule and the drain's plan lock this row, so a change and a plan of
-- one schedule never interleave.
CREATE TABLE agent.saved_search_schedules (
    organization_id  uuid        NOT NULL,
    saved_search_id  uuid        NOT NULL,
    interval_seconds bigint,
    cron             text,
    time_zone        text        NOT NULL,
    start_at         timestamptz NOT NULL,
    catch_up_seconds bigint      NOT NULL,
    paused           boolean     NOT NULL DEFAULT false,
    next_due_at      timestamptz,
    version          bigint      NOT NULL DEFAULT 1,
    -- The token's sub of whoever last set the schedule: scheduled starts
    -- record it as their actor.
    updated_by       text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,

    CONSTRAINT saved_search_schedules_pkey PRIMARY KEY (organization_id, saved_search_id),
    CONSTRAINT saved_search_schedules_saved_search_fkey
        FOREIGN KEY (organization_id, saved_search_id)
        REFERENCES agent.saved_searches (organization_id, id),
    CONSTRAINT saved_search_schedules_cadence_check CHECK (
        (interval_seconds IS NULL) <> (cron IS NULL)),
    CONSTRAINT saved_search_schedules_interval_check CHECK (
        interval_seconds IS NULL OR interval_seconds BETWEEN 60 AND 31622400),
    CONSTRAINT saved_search_schedules_cron_check CHECK (
        cron IS NULL OR (cron <> '' AND octet_length(cron) <= 100)),
    CONSTRAINT saved_search_schedules_time_zone_check CHECK (
        time_zone <> '' AND octet_length(time_zone) <= 64),
    CONSTRAINT saved_search_schedules_catch_up_check CHECK (catch_up_seconds BETWEEN 60 AND 604800),
    CONSTRAINT saved_search_schedules_paused_check CHECK (NOT paused OR next_due_at IS NULL),
    CONSTRAINT saved_search_schedules_version_check CHECK (version >= 1)
);

-- The plan reads the schedules that came due, earliest first.
CREATE INDEX saved_search_schedules_due_idx
    ON agent.saved_search_schedules (next_due_at) WHERE next_due_at IS NOT NULL;

-- One row per time a schedule came due. The natural key (organization,
-- saved search, due time) is the primary key: the database, not a check
-- then a write, decides that an occurrence exists once, and the drain
-- starts it under a start key derived from that key, so it admits at most
-- one Run. An occurrence never refers to its schedule, which may be
-- removed or replaced while the occurrence is kept with its Run.
--
-- status: pending (never attempted) and not_ready (a transient failure;
-- next_attempt_at is its retry) are open; started (run_id), refused
-- (reason) and missed (due more than the catch-up window ago, never
-- started) are final. While a drain holds an open occurrence, lease_token
-- is its fence and next_attempt_at the end of its lease.
CREATE TABLE agent.schedule_occurrences (
    organization_id uuid        NOT NULL,
    saved_search_id uuid        NOT NULL,
    due_at          timestamptz NOT NULL,
    -- An id to name the row by (lists, the sweeper); the key is above.
    id              uuid        NOT NULL,
    status          text        NOT NULL,
    reason          text,
    run_id          uuid,
    attempts        integer     NOT NULL DEFAULT 0,
    -- Past it the occurrence is missed: due_at plus the catch-up window
    -- its schedule had when it came due.
    deadline        timestamptz NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    lease_token     uuid,
    last_error      text,
    created_at      timestamptz NOT NULL,
    closed_at       timestamptz,
    -- Set when the occurrence closes: its Run's retain_until, or, with no
    -- Run, as long as a Run would be kept.
    retain_until    timestamptz,

    CONSTRAINT schedule_occurrences_pkey PRIMARY KEY (organization_id, saved_search_id, due_at),
    CONSTRAINT schedule_occurrences_saved_search_fkey
        FOREIGN KEY (organization_id, saved_search_id)
        REFERENCES agent.saved_searches (organization_id, id),
    CONSTRAINT schedule_occurrences_status_check CHECK (
        status IN ('pending', 'not_ready', 'started', 'refused', 'missed')),
    CONSTRAINT schedule_occurrences_open_check CHECK (
        (status IN ('pending', 'not_ready')) = (closed_at IS NULL)
        AND (closed_at IS NULL) = (retain_until IS NULL)),
    CONSTRAINT schedule_occurrences_started_check CHECK ((status = 'started') = (run_id IS NOT NULL)),
    CONSTRAINT schedule_occurrences_reason_check CHECK (
        (status IN ('refused', 'not_ready')) = (reason IS NOT NULL)
        AND (reason IS NULL OR octet_length(reason) <= 64)),
    CONSTRAINT schedule_occurrences_lease_check CHECK (lease_token IS NULL OR closed_at IS NULL),
    CONSTRAINT schedule_occurrences_attempts_check CHECK (attempts >= 0)
);

-- The drain's take: open occurrences by the time they may next be tried.
-- Only open rows are indexed, so the index stays as small as the backlog.
CREATE INDEX schedule_occurrences_open_idx
    ON agent.schedule_occurrences (next_attempt_at) WHERE closed_at IS NULL;

-- The sweeper's retention pass, oldest first.
CREATE INDEX schedule_occurrences_retain_idx
    ON agent.schedule_occurrences (retain_until) WHERE retain_until IS NOT NULL;

-- Who started a snapshot's freeze: a client ('api') or the drain
-- ('schedule'). A constant default is a catalog change alone: no rewrite.
ALTER TABLE agent.saved_search_snapshots
    ADD COLUMN origin text NOT NULL DEFAULT 'api'
    CONSTRAINT saved_search_snapshots_origin_check CHECK (origin IN ('api', 'schedule'));

-- +goose Down
ALTER TABLE agent.saved_search_snapshots DROP COLUMN origin;
DROP TABLE agent.schedule_occurrences;
DROP TABLE agent.saved_search_schedules;
