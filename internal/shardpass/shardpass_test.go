package shardpass_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/shardpass"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// expired finds expired claims, oldest first: the sweeper's read.
var expired = shardpass.New("agent.idempotency_keys", `
SELECT k.organization_id::text
FROM agent.idempotency_keys k
WHERE k.retain_until <= now()
ORDER BY k.retain_until
LIMIT @limit`)

// lockExpired locks the expired claims of a group, as a step does.
const lockExpired = `
SELECT k.id
FROM agent.idempotency_keys k
WHERE (@all::boolean OR k.organization_id = ANY(@keys::uuid[])) AND k.retain_until <= now()
ORDER BY k.retain_until
LIMIT @limit
FOR UPDATE SKIP LOCKED`

// seedExpired writes one expired claim per organization of orgs, the
// first the oldest.
func seedExpired(t *testing.T, db *pgxpool.Pool, orgs []uuid.UUID) {
	t.Helper()
	for i, org := range orgs {
		at := time.Now().Add(-time.Duration(len(orgs)-i) * time.Minute)
		if _, err := db.Exec(context.Background(), `
INSERT INTO agent.idempotency_keys (id, organization_id, scope, key, request_hash, status, lease_token,
	claimed_at, lease_expires_at, retain_until)
VALUES ($1, $2, 'tool.x', 'k', 'h', 'processing', $1, $3, $3, $3)`, uuid.New(), org, at); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPassGroupsTheDueRowsByShard: on plain PostgreSQL a pass is one step
// over the whole table with the whole bound; on Citus (make test-citus)
// one step per shard holding due rows, each with the keys of its shard
// alone and its share of the bound, and each step's FOR UPDATE, routed to
// its shard, locks exactly its share.
func TestPassGroupsTheDueRowsByShard(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	orgs := make([]uuid.UUID, 24)
	for i := range orgs {
		orgs[i] = uuid.New()
	}
	seedExpired(t, db, orgs)
	const bound = 16

	var groups []shardpass.Group
	locked := 0
	err := expired.Run(ctx, db, bound, nil, func(ctx context.Context, g shardpass.Group) error {
		groups = append(groups, g)
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, lockExpired, g.Args(nil))
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			if err != nil {
				return err
			}
			if len(ids) != g.Limit {
				return fmt.Errorf("shard %d locked %d rows, want its share %d", g.Shard, len(ids), g.Limit)
			}
			locked += len(ids)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !pgtest.Citus() {
		if len(groups) != 1 || !groups[0].All || groups[0].Limit != bound || groups[0].Keys != nil {
			t.Fatalf("groups on PostgreSQL = %+v, want one step over every row with the bound", groups)
		}
		if locked != bound {
			t.Errorf("locked %d, want the bound %d", locked, bound)
		}
		return
	}
	if len(groups) < 2 {
		t.Fatalf("groups on Citus = %+v, want one per shard holding due rows (24 organizations on 4 shards)", groups)
	}
	var keys []string
	total := 0
	for _, g := range groups {
		if g.All || g.Shard == 0 || len(g.Keys) == 0 {
			t.Errorf("group %+v: want a shard's keys", g)
		}
		for _, k := range g.Keys {
			var shard int64
			if err := db.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column('agent.idempotency_keys', $1::uuid)`, k).Scan(&shard); err != nil {
				t.Fatal(err)
			}
			if shard != g.Shard {
				t.Errorf("key %s of group %d is in shard %d", k, g.Shard, shard)
			}
		}
		keys = append(keys, g.Keys...)
		total += g.Limit
	}
	// The oldest 16 rows are those of the first 16 organizations.
	var want []string
	for _, o := range orgs[:bound] {
		want = append(want, o.String())
	}
	slices.Sort(keys)
	slices.Sort(want)
	if total != bound || locked != bound || !slices.Equal(keys, want) {
		t.Errorf("the groups hold %d rows (%d locked) of organizations %v, want the %d oldest: %v", total, locked, keys, bound, want)
	}
}

// TestPassStepsEveryShardWhenOneFails: a step that fails (its worker is
// down) does not keep the other shards' steps from running; the failures
// come back joined, each naming its shard.
func TestPassStepsEveryShardWhenOneFails(t *testing.T) {
	t.Parallel()
	if !pgtest.Citus() {
		t.Skip("one step in all on PostgreSQL: make test-citus runs it on shards")
	}
	db := pgtest.NewDB(t)
	orgs := make([]uuid.UUID, 24)
	for i := range orgs {
		orgs[i] = uuid.New()
	}
	seedExpired(t, db, orgs)
	var mu sync.Mutex
	steps := 0
	err := expired.Run(context.Background(), db, 100, nil, func(context.Context, shardpass.Group) error {
		mu.Lock()
		defer mu.Unlock()
		steps++
		if steps == 1 {
			return fmt.Errorf("worker down")
		}
		return nil
	})
	if err == nil || steps < 2 {
		t.Fatalf("Run = %v after %d steps, want the first step's failure and the others run", err, steps)
	}
}

func TestPassRefusesABoundBelowOne(t *testing.T) {
	t.Parallel()
	if err := expired.Run(context.Background(), nil, 0, nil, nil); err == nil {
		t.Fatal("Run with bound 0 = nil, want an error")
	}
}
