package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// newClock returns a stubbed database clock. Every statement of a service
// built on its Clock runs at its Now, so tests move leases and retention
// without sleeping.
func newClock() *dbclocktest.Stub {
	return dbclocktest.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
}

// bundle is what setup hands a test.
type bundle struct {
	pool  *pgxpool.Pool
	svc   *idempotency.Service // on the stubbed clock
	clock *dbclocktest.Stub
	stmts *pgtest.Tracer // counts the statements the service runs
	org   uuid.UUID
}

// setup gives a test its own migrated database, a service on a stubbed
// clock, and a counter of the statements that service runs.
func setup(t *testing.T) *bundle {
	t.Helper()
	stmts := &pgtest.Tracer{}
	pool := pgtest.NewTracedDB(t, stmts)
	c := newClock()
	return &bundle{
		pool:  pool,
		svc:   idempotency.NewService(pool, idempotency.Config{Clock: c.Clock()}),
		clock: c,
		stmts: stmts,
		org:   uuid.New(),
	}
}

// warm opens n connections up front, so concurrent callers race on the
// database rather than queueing behind connection set-up one at a time.
func warm(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	conns := make([]*pgxpool.Conn, 0, n)
	for range n {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
}

// rowCount counts the stored claims.
func (b *bundle) rowCount(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM agent.idempotency_keys`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// row reads the stored claim for key, failing the test when there is none.
func (b *bundle) row(t *testing.T, scope, key string) *idempotency.Record {
	t.Helper()
	rec, err := b.svc.Repository().Get(context.Background(), b.org, scope, key)
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil {
		t.Fatalf("no row for %s/%s", scope, key)
	}
	return rec
}

// mustClaim claims key and fails the test unless the outcome is claimed.
func (b *bundle) mustClaim(t *testing.T, scope, key, hash string, lease time.Duration) *idempotency.Claim {
	t.Helper()
	out, err := b.svc.Claim(context.Background(), b.org, scope, key, hash, lease)
	if err != nil {
		t.Fatalf("Claim(%q) error: %v", key, err)
	}
	if out.Kind != idempotency.KindClaimed || out.Claim == nil {
		t.Fatalf("Claim(%q) = %v, want claimed", key, out.Kind)
	}
	return out.Claim
}

func (b *bundle) claim(t *testing.T, scope, key, hash string, lease time.Duration) idempotency.Outcome {
	t.Helper()
	out, err := b.svc.Claim(context.Background(), b.org, scope, key, hash, lease)
	if err != nil {
		t.Fatalf("Claim(%q) error: %v", key, err)
	}
	return out
}

func (b *bundle) read(t *testing.T, scope, key, hash string) idempotency.Outcome {
	t.Helper()
	out, err := b.svc.Read(context.Background(), b.org, scope, key, hash)
	if err != nil {
		t.Fatalf("Read(%q) error: %v", key, err)
	}
	return out
}

func answer(v string) idempotency.Completion {
	return idempotency.Completion{
		ResourceType: "test_resource",
		ResourceID:   v,
		Response:     json.RawMessage(fmt.Sprintf(`{"answer":%q}`, v)),
	}
}

func (b *bundle) mustComplete(t *testing.T, c *idempotency.Claim, v string) {
	t.Helper()
	ok, err := b.svc.Complete(context.Background(), c, answer(v))
	if err != nil || !ok {
		t.Fatalf("Complete(%s) = %v, %v; want true, nil", v, ok, err)
	}
}

// wantCompleted fails the test unless out is the completed answer v.
func wantCompleted(t *testing.T, out idempotency.Outcome, v string) {
	t.Helper()
	if out.Kind != idempotency.KindCompleted {
		t.Fatalf("outcome = %v, want completed", out.Kind)
	}
	var body struct{ Answer string }
	if err := json.Unmarshal(out.Response, &body); err != nil {
		t.Fatalf("stored response %s: %v", out.Response, err)
	}
	if body.Answer != v || out.ResourceType != "test_resource" || out.ResourceID != v {
		t.Fatalf("completed = (%s, %s, %s), want answer %q of resource test_resource/%s",
			out.Response, out.ResourceType, out.ResourceID, v, v)
	}
	if out.Claim != nil || out.RetryAfter != 0 {
		t.Fatalf("completed outcome carries claim %v / retry-after %v", out.Claim, out.RetryAfter)
	}
}

// concurrently runs f n times at once, each after a common start signal, and
// returns the outcomes.
func concurrently(t *testing.T, pool *pgxpool.Pool, n int, f func(i int) (idempotency.Outcome, error)) []idempotency.Outcome {
	t.Helper()
	outs := make([]idempotency.Outcome, n)
	errs := make([]error, n)
	warm(t, pool, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			outs[i], errs[i] = f(i)
		}()
	}
	start.Done()
	done.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	return outs
}

func countKinds(outs []idempotency.Outcome) map[idempotency.Kind]int {
	m := map[idempotency.Kind]int{}
	for _, o := range outs {
		m[o.Kind]++
	}
	return m
}
