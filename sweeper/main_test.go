package sweeper

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// newClock returns a stubbed database clock at t, to the microsecond the
// database keeps. The plane and the sweeper of a bundle share it.
func newClock(t time.Time) *dbclocktest.Stub {
	return dbclocktest.New(t.UTC().Truncate(time.Microsecond))
}

// bundle is what setup hands a test.
type bundle struct {
	ctx   context.Context
	db    *pgxpool.Pool
	clock *dbclocktest.Stub
	plane *idempotency.Service // on the stubbed clock
	org   uuid.UUID
	logs  *pgtest.SyncBuffer // the sweeper's log, written from its goroutines
}

// setup gives a test its own migrated database and a plane on a clock
// stubbed at a fixed instant.
func setup(t *testing.T) *bundle {
	t.Helper()
	db := pgtest.NewDB(t)
	c := newClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	return &bundle{
		ctx:   context.Background(),
		db:    db,
		clock: c,
		plane: idempotency.NewService(db, idempotency.Config{Clock: c.Clock()}),
		org:   uuid.New(),
		logs:  &pgtest.SyncBuffer{},
	}
}

// sweeper returns a sweeper on the bundle's database that logs every level
// to b.logs and, unless cfg sets its own clock, runs on the bundle's clock.
func (b *bundle) sweeper(t *testing.T, cfg Config) *Sweeper {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = b.clock.Clock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := New(b.db, cfg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	return s
}

// runOnce runs s once and fails the test on an error.
func (b *bundle) runOnce(t *testing.T, s *Sweeper) Report {
	t.Helper()
	rep, err := s.RunOnce(b.ctx)
	if err != nil {
		t.Fatalf("RunOnce = %+v, %v", rep, err)
	}
	return rep
}

// claim claims key in scope on plane with lease, failing the test unless the
// outcome is claimed.
func (b *bundle) claim(t *testing.T, plane *idempotency.Service, scope, key string, lease time.Duration) *idempotency.Claim {
	t.Helper()
	out, err := plane.Claim(b.ctx, b.org, scope, key, "hash", lease)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim(%q) = %v, %v; want claimed", key, out.Kind, err)
	}
	return out.Claim
}

// answer is the completion tests store: it names the key.
func answer(key string) idempotency.Completion {
	return idempotency.Completion{
		ResourceType: "test_resource",
		ResourceID:   key,
		Response:     json.RawMessage(fmt.Sprintf(`{"key":%q}`, key)),
	}
}

// claimDone claims key on the bundle's plane and completes it.
func (b *bundle) claimDone(t *testing.T, scope, key string, lease time.Duration) *idempotency.Claim {
	t.Helper()
	c := b.claim(t, b.plane, scope, key, lease)
	if ok, err := b.plane.Complete(b.ctx, c, answer(key)); !ok || err != nil {
		t.Fatalf("Complete(%q) = %v, %v", key, ok, err)
	}
	return c
}

// keys returns the keys of the stored claims of the bundle's organization.
func (b *bundle) keys(t *testing.T) map[string]bool {
	t.Helper()
	rows, err := b.db.Query(b.ctx, `SELECT key FROM agent.idempotency_keys WHERE organization_id = $1`, b.org)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	set := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		set[k] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return set
}

// count returns the number of rows of table.
func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	// table is one of this package's constants, never input.
	if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// exec runs sql, failing the test if it fails.
func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.db.Exec(b.ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

// strings returns the first column, text, of query's rows.
func (b *bundle) strings(t *testing.T, query string) []string {
	t.Helper()
	return column[string](t, b, query)
}

// column returns the first column of query's rows.
func column[T any](t *testing.T, b *bundle, query string) []T {
	t.Helper()
	rows, err := b.db.Query(b.ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// seedExpired inserts n claims of the bundle's organization whose retention
// passed an hour before the bundle's clock, in one statement, keyed
// prefix-0, prefix-1, ...
func (b *bundle) seedExpired(t *testing.T, prefix string, n int) {
	t.Helper()
	b.exec(t, `
INSERT INTO agent.idempotency_keys
	(id, organization_id, scope, key, request_hash, status, lease_token,
	 resource_type, resource_id, response, claimed_at, lease_expires_at, retain_until)
SELECT gen_random_uuid(), $1, 'webhook.nylas', $2 || i, 'hash', 'completed', gen_random_uuid(),
	'test_resource', $2 || i, '{}', c.at - interval '25 hours' - i * interval '1 millisecond',
	c.at - interval '25 hours', c.at - interval '1 hour' - i * interval '1 millisecond'
FROM generate_series(0, $3::int - 1) i, (SELECT $4::timestamptz AS at) c`,
		b.org, prefix+"-", n, b.clock.Now())
}
