-- searchd distributes its own tables on Citus (issue 25; docs/scaling.md).
--
-- On a database where the citus extension is present (created, with its
-- workers added, before `searchd migrate` runs), this migration
-- distributes every tenant table by organization_id in one co-location
-- group, anchored on agent.idempotency_keys: every key of those tables
-- starts with the organization (migrations/sharding_test.go holds them to
-- it), so each request's statements are routed to one shard group and each
-- of its transactions commits on one worker. The provider job directory is
-- a reference table, a copy on every node: a callback, which names no
-- organization, finds its job there by the pair it names, on the
-- coordinator's own copy, whichever worker is down; a registration, rare,
-- writes every copy. The rest stay local tables on the coordinator (each
-- with its reason in migrations/sharding_test.go: the console's sessions
-- among them, 00017). On plain PostgreSQL
-- every function below is a no-op, and the schema is exactly as before.
--
-- A later migration distributes a table it adds with one line, which is a
-- no-op on plain PostgreSQL and on a table distributed already:
--
--     SELECT agent.distribute_tenant_table('agent.new_table');
--
-- (or agent.distribute_reference_table for a small table every node must
-- join with). Tables are distributed in the order of their foreign keys:
-- a referenced table first.
--
-- The claim-ended notification moves from a trigger to the application
-- (idempotency.Service notifies on the connection it already holds, when a
-- waiter marked the claim): Citus refuses to distribute a table with
-- triggers, a trigger on a shard fires on the worker that holds it, while
-- the waiters LISTEN on the coordinator, and NOTIFY cannot be prepared in a
-- two-phase commit. The snapshot immutability trigger raises and notifies
-- nobody; it stays, created on every shard.

-- +goose Up

-- agent.clock is the clock of a statement that writes a distributed table:
-- the stub a test passes, else now(). On Citus a data-modifying statement
-- may not hold a non-IMMUTABLE function in a COALESCE or CASE, nor apply a
-- STABLE one to a column, so coalesce($now, now()) is refused there; a
-- call of this function, which no planner inlines (PL/pgSQL), is evaluated
-- once on the coordinator before the statement is routed to its shard. On
-- plain PostgreSQL it is coalesce($now, now()) behind a function call.
-- +goose StatementBegin
CREATE FUNCTION agent.clock(stub timestamptz) RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN coalesce(stub, now());
END;
$$;
-- +goose StatementEnd

-- agent.is_distributed reports whether rel is a hash-distributed Citus
-- table: false on plain PostgreSQL, where pg_dist_partition does not exist
-- (the statement that reads it is planned only when it runs).
-- +goose StatementBegin
CREATE FUNCTION agent.is_distributed(rel regclass) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = rel AND p.partmethod = 'h');
END;
$$;
-- +goose StatementEnd

-- agent.shard_of returns the id of the shard of rel that holds the rows
-- whose distribution column is key (as text), or 0 when rel is not
-- distributed: internal/shardpass groups a background pass's rows by it.
-- +goose StatementBegin
CREATE FUNCTION agent.shard_of(rel regclass, key text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT agent.is_distributed(rel) THEN
        RETURN 0;
    END IF;
    RETURN get_shard_id_for_distribution_column(rel, key);
END;
$$;
-- +goose StatementEnd

-- agent.drop_local_copy removes from the coordinator the local rows of rel
-- that distributing it copied to its shards (Citus leaves them on disk,
-- invisible), once no local table references rel any more: Citus refuses
-- to truncate a table a local table has a foreign key to. 00019 calls it
-- again once every table is distributed.
-- +goose StatementBegin
CREATE FUNCTION agent.drop_local_copy(rel regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = rel) OR EXISTS (
        SELECT 1 FROM pg_catalog.pg_constraint c
        WHERE c.confrelid = rel AND c.contype = 'f'
            AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = c.conrelid)) THEN
        RETURN;
    END IF;
    PERFORM truncate_local_data_after_distributing_table(rel);
END;
$$;
-- +goose StatementEnd

-- agent.distribute_table distributes rel by dist_column, co-located with
-- colocate_with (NULL: a group of its own), when the citus extension is
-- present and rel is not distributed yet; otherwise it does nothing. Rows
-- rel already holds are copied to its shards (and dropped from the
-- coordinator; see agent.drop_local_copy).
-- +goose StatementBegin
CREATE FUNCTION agent.distribute_table(rel regclass, dist_column text, colocate_with regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') OR agent.is_distributed(rel) THEN
        RETURN;
    END IF;
    -- One connection per worker for the whole migration: its DDL and the
    -- copies of existing rows then see one another in this transaction.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    -- The only triggers left (the snapshot immutability guard) raise and
    -- notify nobody, so they are safe on every shard.
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM create_distributed_table(rel, dist_column,
        colocate_with => coalesce(colocate_with::text, 'none'));
    PERFORM agent.drop_local_copy(rel);
END;
$$;
-- +goose StatementEnd

-- agent.distribute_tenant_table distributes rel by organization_id in the
-- tenant tables' co-location group (anchored on agent.idempotency_keys).
-- +goose StatementBegin
CREATE FUNCTION agent.distribute_tenant_table(rel regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM agent.distribute_table(rel, 'organization_id',
        CASE WHEN rel = 'agent.idempotency_keys'::regclass THEN NULL ELSE 'agent.idempotency_keys'::regclass END);
END;
$$;
-- +goose StatementEnd

-- agent.distribute_reference_table makes rel a reference table (a copy on
-- every node, written on all of them) when the citus extension is present
-- and rel is not one yet; otherwise it does nothing.
-- +goose StatementBegin
CREATE FUNCTION agent.distribute_reference_table(rel regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    -- A statement apart: on plain PostgreSQL, the one above returned
    -- before this one, which names a Citus catalog, is planned.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = rel) THEN
        RETURN;
    END IF;
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM create_reference_table(rel);
    PERFORM agent.drop_local_copy(rel);
END;
$$;
-- +goose StatementEnd

-- agent.distribute_function creates fn on every node, when the citus
-- extension is present: a statement routed to a worker that calls it finds
-- it there. Calls are not delegated (no distribution argument).
-- +goose StatementBegin
CREATE FUNCTION agent.distribute_function(fn regprocedure) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function(fn);
END;
$$;
-- +goose StatementEnd

DROP TRIGGER idempotency_keys_released_notify ON agent.idempotency_keys;
DROP TRIGGER idempotency_keys_completed_notify ON agent.idempotency_keys;
DROP FUNCTION agent.idempotency_keys_notify_ended();

-- The tenant tables, referenced tables first.
SELECT agent.distribute_tenant_table('agent.idempotency_keys');
SELECT agent.distribute_tenant_table('agent.saved_searches');
SELECT agent.distribute_tenant_table('agent.saved_search_baselines');
SELECT agent.distribute_tenant_table('agent.saved_search_snapshots');
SELECT agent.distribute_tenant_table('agent.runs');
SELECT agent.distribute_tenant_table('agent.provider_jobs');
SELECT agent.distribute_tenant_table('agent.tool_call_resolutions');
SELECT agent.distribute_tenant_table('agent.provider_inbox');
SELECT agent.distribute_tenant_table('agent.provider_inbox_copies');
-- Run dispatch (migration 00016): the outbox row and its history go with
-- their Run's organization.
SELECT agent.distribute_tenant_table('agent.run_dispatches');
SELECT agent.distribute_tenant_table('agent.run_dispatch_attempts');
SELECT agent.distribute_tenant_table('agent.run_dispatch_retries');
SELECT agent.distribute_tenant_table('agent.run_status_changes');
-- Schedules and their occurrences (migration 00018).
SELECT agent.distribute_tenant_table('agent.saved_search_schedules');
SELECT agent.distribute_tenant_table('agent.schedule_occurrences');

-- The callback directory, on every node.
SELECT agent.distribute_reference_table('agent.provider_job_directory');

-- The local copies of the tables that were referenced while they were
-- distributed: no local table references any of them now.
SELECT agent.drop_local_copy(c.oid)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'agent' AND c.relkind = 'r';

-- Called by the pipelined completion, which runs on the claim's worker.
SELECT agent.distribute_function('agent.idempotency_fence_lost(uuid)');

-- +goose Down
-- Undistributing is not automated: on Citus, undistribute_table() each
-- table first (referencing tables first). On PostgreSQL this restores the
-- notification triggers and drops the functions.
-- +goose StatementBegin
CREATE FUNCTION agent.idempotency_keys_notify_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('searchd_claim_ended',
        md5(OLD.organization_id::text || '/' || OLD.scope || '/' || OLD.key));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER idempotency_keys_completed_notify
    AFTER UPDATE OF status ON agent.idempotency_keys
    FOR EACH ROW
    WHEN (OLD.scope = 'surface.saved_search.start'
          AND OLD.status = 'processing' AND NEW.status = 'completed'
          AND OLD.waited)
    EXECUTE FUNCTION agent.idempotency_keys_notify_ended();
CREATE TRIGGER idempotency_keys_released_notify
    AFTER DELETE ON agent.idempotency_keys
    FOR EACH ROW
    WHEN (OLD.scope = 'surface.saved_search.start' AND OLD.status = 'processing')
    EXECUTE FUNCTION agent.idempotency_keys_notify_ended();
DROP FUNCTION agent.distribute_function(regprocedure);
DROP FUNCTION agent.distribute_reference_table(regclass);
DROP FUNCTION agent.distribute_tenant_table(regclass);
DROP FUNCTION agent.distribute_table(regclass, text, regclass);
DROP FUNCTION agent.drop_local_copy(regclass);
DROP FUNCTION agent.shard_of(regclass, text);
DROP FUNCTION agent.is_distributed(regclass);
DROP FUNCTION agent.clock(timestamptz);
