-- Stored sizes, so lists answer summaries without reading whole documents.
--
-- The snapshot list (paginated, see snapshot.Store.ListBySavedSearch), the
-- saved-search list and the Run list name the size of what they leave out:
-- a snapshot's brief and baseline, a saved search's baseline, a Run's input.
-- Computing those per page would make PostgreSQL detoast every document of
-- the page on every list call, which is the cost the summaries exist to
-- avoid. Generated columns compute them once, when a row is written, from
-- immutable functions of the row; the ALTERs below compute them for the
-- existing rows too (a table rewrite, once).
--
-- Sizes are octet lengths of PostgreSQL's JSON text of the value (jsonb
-- output: ", " and ": " separators), close to but not the bytes of the API's
-- JSON; they say how large the full document is, not its exact encoding.

-- +goose Up
ALTER TABLE agent.saved_search_snapshots
    ADD COLUMN brief_bytes integer GENERATED ALWAYS AS (octet_length(brief::text)) STORED,
    ADD COLUMN baseline_bytes integer GENERATED ALWAYS AS (octet_length(baseline::text)) STORED,
    ADD COLUMN baseline_items integer
        GENERATED ALWAYS AS (coalesce(jsonb_array_length(baseline -> 'items'), 0)) STORED;

ALTER TABLE agent.saved_searches
    ADD COLUMN brief_bytes integer GENERATED ALWAYS AS (octet_length(brief::text)) STORED;

ALTER TABLE agent.saved_search_baselines
    ADD COLUMN item_count integer GENERATED ALWAYS AS (cardinality(items)) STORED;

ALTER TABLE agent.runs
    ADD COLUMN input_bytes integer GENERATED ALWAYS AS (octet_length(input::text)) STORED;

-- +goose Down
ALTER TABLE agent.runs DROP COLUMN input_bytes;
ALTER TABLE agent.saved_search_baselines DROP COLUMN item_count;
ALTER TABLE agent.saved_searches DROP COLUMN brief_bytes;
ALTER TABLE agent.saved_search_snapshots
    DROP COLUMN baseline_items, DROP COLUMN baseline_bytes, DROP COLUMN brief_bytes;
