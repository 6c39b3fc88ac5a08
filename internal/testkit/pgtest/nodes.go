package pgtest

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// LockWaits returns how many backends of db's database wait on a lock. On
// Citus it asks every node (citus_stat_activity), since a routed statement
// waits on its worker.
func LockWaits(ctx context.Context, db Querier) (int, error) {
	var view string
	if err := db.QueryRow(ctx, `SELECT coalesce(to_regclass('pg_catalog.citus_stat_activity')::text, 'pg_stat_activity')`).Scan(&view); err != nil {
		return 0, err
	}
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM `+view+`
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
	return n, err
}

// OrganizationPerNode returns one new organization id per Citus node that
// holds tenant shards, in node order; on PostgreSQL, one id.
func OrganizationPerNode(ctx context.Context, db Querier) ([]uuid.UUID, error) {
	var citus bool
	if err := db.QueryRow(ctx, `SELECT agent.is_distributed('agent.idempotency_keys')`).Scan(&citus); err != nil {
		return nil, err
	}
	if !citus {
		return []uuid.UUID{uuid.New()}, nil
	}
	var nodes int
	if err := db.QueryRow(ctx, `SELECT count(DISTINCT (nodename, nodeport)) FROM citus_shards
		WHERE table_name = 'agent.idempotency_keys'::regclass`).Scan(&nodes); err != nil {
		return nil, err
	}
	found := map[string]uuid.UUID{}
	for range 1000 {
		if len(found) == nodes {
			break
		}
		org := uuid.New()
		var node string
		if err := db.QueryRow(ctx, `SELECT nodename || ':' || nodeport FROM citus_shards
			WHERE shardid = get_shard_id_for_distribution_column('agent.idempotency_keys', $1::uuid)`, org).Scan(&node); err != nil {
			return nil, err
		}
		if _, ok := found[node]; !ok {
			found[node] = org
		}
	}
	if len(found) != nodes {
		return nil, fmt.Errorf("pgtest: found organizations on %d of %d nodes", len(found), nodes)
	}
	out := make([]uuid.UUID, 0, nodes)
	for _, node := range slices.Sorted(maps.Keys(found)) {
		out = append(out, found[node])
	}
	return out, nil
}
