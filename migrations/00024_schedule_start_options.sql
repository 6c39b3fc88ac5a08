-- A schedule's start options (issue 37): the max_results and note of the
-- Runs it starts, with a client's start's defaults and limits (checked in
-- Go before any SQL: 1 to 1000, at most 500 characters). Each occurrence
-- keeps the options its schedule had when it came due, so every attempt
-- of one occurrence asks for the same start (its key names one request),
-- however the schedule changes meanwhile.
--
-- Columns with a constant default: a catalog change, no rewrite, on
-- PostgreSQL and on Citus alike. A replica of the previous release writes
-- neither and gets the defaults, which is what it started with.

-- +goose Up
ALTER TABLE agent.saved_search_schedules
    ADD COLUMN max_results integer NOT NULL DEFAULT 100,
    ADD COLUMN note text NOT NULL DEFAULT '';
ALTER TABLE agent.schedule_occurrences
    ADD COLUMN max_results integer NOT NULL DEFAULT 100,
    ADD COLUMN note text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE agent.schedule_occurrences DROP COLUMN note, DROP COLUMN max_results;
ALTER TABLE agent.saved_search_schedules DROP COLUMN note, DROP COLUMN max_results;
