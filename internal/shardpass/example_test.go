package shardpass_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/shardpass"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// A background worker's bounded pass: delete at most 1000 expired claims,
// oldest first, one transaction per shard that holds some (one in all on
// PostgreSQL). The due query finds the rows' distribution column; the
// step's statements filter on @all or @keys, so each runs on one shard.
func ExampleNew() {
	db, err := pgtest.OpenDB()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if _, err := db.Exec(ctx, `
INSERT INTO agent.idempotency_keys (id, organization_id, scope, key, request_hash, status, lease_token,
	claimed_at, lease_expires_at, retain_until)
SELECT gen_random_uuid(), gen_random_uuid(), 'tool.x', 'k', 'h', 'processing', gen_random_uuid(),
	now() - interval '2 days', now() - interval '2 days', now() - interval '1 day'
FROM generate_series(1, 3)`); err != nil {
		fmt.Println(err)
		return
	}

	expired := shardpass.New("agent.idempotency_keys", `
SELECT k.organization_id::text FROM agent.idempotency_keys k
WHERE k.retain_until <= now()
ORDER BY k.retain_until LIMIT @limit`)
	deleted := 0
	err = expired.Run(ctx, db, 1000, nil, func(ctx context.Context, g shardpass.Group) error {
		tag, err := db.Exec(ctx, `
DELETE FROM agent.idempotency_keys k
WHERE (@all::boolean OR k.organization_id = ANY(@keys::uuid[]))
	AND k.ctid IN (SELECT c.ctid FROM agent.idempotency_keys c
		WHERE (@all::boolean OR c.organization_id = ANY(@keys::uuid[])) AND c.retain_until <= now()
		ORDER BY c.retain_until LIMIT @limit FOR UPDATE SKIP LOCKED)`, g.Args(pgx.NamedArgs{}))
		deleted += int(tag.RowsAffected())
		return err
	})
	fmt.Println(deleted, err)
	// Output: 3 <nil>
}
