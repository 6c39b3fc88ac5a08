-- Every key of a tenant table carries its organization, so the schema can be
-- distributed by organization_id (Citus; see docs/scaling.md) without a
-- change of meaning.
--
-- A distributed table can enforce a primary key, unique constraint or
-- foreign key only when it includes the distribution column: each shard
-- checks its own rows, and only a key that holds the organization keeps all
-- rows that could collide in one shard. Here the primary keys were the id
-- alone, and agent.saved_search_baselines had no organization at all.
--
-- Each primary key becomes (id, organization_id), id first. It is no weaker:
-- ids are UUIDs, unique on their own, and the pair is unique whenever the id
-- is. The order keeps every statement that finds a row by its id alone (a
-- claim completed or released by claim id, a callback resolving its job by
-- searchd's job id) on the same index as before, and each table keeps the
-- same number of indexes. On a distributed table those statements are
-- routed to every shard until they also name the organization; docs/scaling.md
-- lists them. migrations/sharding_test.go asserts the rule for every
-- distributed table, so a migration that breaks it fails the tests.
--
-- Rebuilding a primary key holds an exclusive lock on its table while the
-- new index is built: apply this migration in a quiet moment on a large
-- database.

-- +goose Up

-- The baseline gets its saved search's organization, filled from it.
ALTER TABLE agent.saved_search_baselines ADD COLUMN organization_id uuid;
UPDATE agent.saved_search_baselines b
SET organization_id = s.organization_id
FROM agent.saved_searches s
WHERE s.id = b.saved_search_id;
ALTER TABLE agent.saved_search_baselines ALTER COLUMN organization_id SET NOT NULL;

-- The foreign key on saved_searches (id) depends on the primary key about
-- to be replaced.
ALTER TABLE agent.saved_search_baselines DROP CONSTRAINT saved_search_baselines_saved_search_id_fkey;

ALTER TABLE agent.idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE agent.idempotency_keys ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (id, organization_id);

ALTER TABLE agent.saved_searches DROP CONSTRAINT saved_searches_pkey;
ALTER TABLE agent.saved_searches ADD CONSTRAINT saved_searches_pkey PRIMARY KEY (id, organization_id);

ALTER TABLE agent.saved_search_baselines DROP CONSTRAINT saved_search_baselines_pkey;
ALTER TABLE agent.saved_search_baselines
    ADD CONSTRAINT saved_search_baselines_pkey PRIMARY KEY (saved_search_id, organization_id);
-- A baseline belongs to a saved search of its own organization.
ALTER TABLE agent.saved_search_baselines
    ADD CONSTRAINT saved_search_baselines_saved_search_fkey
    FOREIGN KEY (saved_search_id, organization_id) REFERENCES agent.saved_searches (id, organization_id);

ALTER TABLE agent.saved_search_snapshots DROP CONSTRAINT saved_search_snapshots_pkey;
ALTER TABLE agent.saved_search_snapshots
    ADD CONSTRAINT saved_search_snapshots_pkey PRIMARY KEY (id, organization_id);

ALTER TABLE agent.runs DROP CONSTRAINT runs_pkey;
ALTER TABLE agent.runs ADD CONSTRAINT runs_pkey PRIMARY KEY (id, organization_id);

ALTER TABLE agent.provider_jobs DROP CONSTRAINT provider_jobs_pkey;
ALTER TABLE agent.provider_jobs ADD CONSTRAINT provider_jobs_pkey PRIMARY KEY (id, organization_id);

-- +goose Down
ALTER TABLE agent.provider_jobs DROP CONSTRAINT provider_jobs_pkey;
ALTER TABLE agent.provider_jobs ADD CONSTRAINT provider_jobs_pkey PRIMARY KEY (id);

ALTER TABLE agent.runs DROP CONSTRAINT runs_pkey;
ALTER TABLE agent.runs ADD CONSTRAINT runs_pkey PRIMARY KEY (id);

ALTER TABLE agent.saved_search_snapshots DROP CONSTRAINT saved_search_snapshots_pkey;
ALTER TABLE agent.saved_search_snapshots ADD CONSTRAINT saved_search_snapshots_pkey PRIMARY KEY (id);

ALTER TABLE agent.saved_search_baselines DROP CONSTRAINT saved_search_baselines_saved_search_fkey;
ALTER TABLE agent.saved_search_baselines DROP CONSTRAINT saved_search_baselines_pkey;
ALTER TABLE agent.saved_search_baselines ADD CONSTRAINT saved_search_baselines_pkey PRIMARY KEY (saved_search_id);

ALTER TABLE agent.saved_searches DROP CONSTRAINT saved_searches_pkey;
ALTER TABLE agent.saved_searches ADD CONSTRAINT saved_searches_pkey PRIMARY KEY (id);

ALTER TABLE agent.idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE agent.idempotency_keys ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (id);

ALTER TABLE agent.saved_search_baselines
    ADD CONSTRAINT saved_search_baselines_saved_search_id_fkey
    FOREIGN KEY (saved_search_id) REFERENCES agent.saved_searches (id);
ALTER TABLE agent.saved_search_baselines DROP COLUMN organization_id;
