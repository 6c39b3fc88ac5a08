package idempotency_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

const startScope = idempotency.ScopeSavedSearchStart

// waitSetup is setup with the real database clock (waiters use real
// timers) and a running hub.
func waitSetup(t *testing.T, maxConns int32) (*bundle, *idempotency.Service, *idempotency.Hub) {
	t.Helper()
	b := setup(t)
	cfg := b.pool.Config()
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc := idempotency.NewService(pool, idempotency.Config{})
	hub := idempotency.NewHub(cfg.ConnConfig, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return b, svc, hub
}

// hold claims key for a holder with lease, failing t unless it is claimed.
func hold(t *testing.T, svc *idempotency.Service, org uuid.UUID, key string, lease time.Duration) *idempotency.Claim {
	t.Helper()
	out, err := svc.Claim(context.Background(), org, startScope, key, hashA, lease)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("holder Claim(%s) = %v, %v", key, out.Kind, err)
	}
	return out.Claim
}

type waitResult struct {
	out     idempotency.Outcome
	err     error
	elapsed time.Duration
}

func waitAsync(svc *idempotency.Service, hub *idempotency.Hub, b *bundle, key string, lease, wait time.Duration) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		start := time.Now()
		out, err := svc.ClaimWait(context.Background(), hub, b.org, startScope, key, hashA, lease, wait)
		ch <- waitResult{out, err, time.Since(start)}
	}()
	return ch
}

func TestWaiterGetsTheAnswerWhenTheHolderCompletes(t *testing.T) {
	t.Parallel()
	b, svc, hub := waitSetup(t, 8)
	ctx := context.Background()
	claim := hold(t, svc, b.org, "k", 30*time.Second)
	res := waitAsync(svc, hub, b, "k", 30*time.Second, 20*time.Second)
	time.Sleep(200 * time.Millisecond) // let the waiter meet the live lease
	select {
	case r := <-res:
		t.Fatalf("waiter answered %v before the holder completed", r.out.Kind)
	default:
	}
	if ok, err := svc.Complete(ctx, claim, answer("done")); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantCompleted(t, r.out, "done")
	// Neither the 30 s lease nor the 20 s wait ran out: the notification
	// woke it.
	if r.elapsed > 10*time.Second {
		t.Fatalf("waiter took %v, want it woken by the completion", r.elapsed)
	}
}

func TestWaiterWhoseWaitRunsOutAnswersProcessing(t *testing.T) {
	t.Parallel()
	b, svc, hub := waitSetup(t, 8)
	hold(t, svc, b.org, "k", 30*time.Second)
	r := <-waitAsync(svc, hub, b, "k", 30*time.Second, 300*time.Millisecond)
	if r.err != nil || r.out.Kind != idempotency.KindProcessing || r.out.RetryAfter <= 0 {
		t.Fatalf("ClaimWait = %v (retry after %v), %v; want processing", r.out.Kind, r.out.RetryAfter, r.err)
	}
	if r.elapsed < 300*time.Millisecond {
		t.Fatalf("ClaimWait answered after %v, before its wait ran out", r.elapsed)
	}
}

func TestWaiterReclaimsWhenTheLeasePasses(t *testing.T) {
	t.Parallel()
	b, svc, hub := waitSetup(t, 8)
	hold(t, svc, b.org, "k", time.Second)
	// The holder dies: no completion, no release, no notification.
	r := <-waitAsync(svc, hub, b, "k", 30*time.Second, 20*time.Second)
	if r.err != nil || r.out.Kind != idempotency.KindClaimed || !r.out.Claim.Reclaimed {
		t.Fatalf("ClaimWait = %+v, %v; want the claim reclaimed", r.out, r.err)
	}
}

func TestWaiterIsWokenByARelease(t *testing.T) {
	t.Parallel()
	b, svc, hub := waitSetup(t, 8)
	ctx := context.Background()
	claim := hold(t, svc, b.org, "k", 30*time.Second)
	res := waitAsync(svc, hub, b, "k", 30*time.Second, 20*time.Second)
	time.Sleep(200 * time.Millisecond)
	if ok, err := svc.Release(ctx, claim); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	r := <-res
	if r.err != nil || r.out.Kind != idempotency.KindClaimed || r.out.Claim.Reclaimed || r.elapsed > 10*time.Second {
		t.Fatalf("ClaimWait after a release = %+v, %v in %v; want a new claim", r.out, r.err, r.elapsed)
	}
}

// TestWaiterCutOffAsItReadsAgainAnswersProcessing cuts a waiter off (its
// context ends, as a shutdown cancels the requests still running) just as
// a release has woken it and it reads the claim again. The wait ended
// without the outcome: it answers processing, as when it is cut off while
// it sleeps, not the cancellation (a 503 where a waiter answers 409).
func TestWaiterCutOffAsItReadsAgainAnswersProcessing(t *testing.T) {
	t.Parallel()
	b, _, hub := waitSetup(t, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The holder's claim, the waiter's first, then its read after the wake.
	db := &cancelOnClaim{Pool: b.pool, cancel: cancel, nth: 3}
	svc := idempotency.NewService(db, idempotency.Config{})
	claim := hold(t, svc, b.org, "k", 30*time.Second)
	res := make(chan waitResult, 1)
	go func() {
		out, err := svc.ClaimWait(ctx, hub, b.org, startScope, "k", hashA, 30*time.Second, 20*time.Second)
		res <- waitResult{out: out, err: err}
	}()
	time.Sleep(200 * time.Millisecond) // let the waiter meet the live lease
	if ok, err := svc.Release(context.Background(), claim); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	r := <-res
	if n := db.claims.Load(); n < 3 {
		t.Fatalf("the waiter sent %d claims, want the holder's, its first and the one after the wake", n)
	}
	if r.err != nil || r.out.Kind != idempotency.KindProcessing || r.out.RetryAfter <= 0 {
		t.Fatalf("ClaimWait cut off as it read again = %v (retry after %v), %v; want processing", r.out.Kind, r.out.RetryAfter, r.err)
	}
}

// cancelOnClaim cancels a context just before the nth claim statement it
// sees (counting from 1) runs, as a request cut off at that moment.
type cancelOnClaim struct {
	*pgxpool.Pool
	cancel context.CancelFunc
	nth    int32
	claims atomic.Int32
}

func (c *cancelOnClaim) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if strings.HasPrefix(strings.TrimSpace(sql), "INSERT INTO agent.idempotency_keys") && c.claims.Add(1) == c.nth {
		c.cancel()
	}
	return c.Pool.QueryRow(ctx, sql, args...)
}

func TestWaitersSurviveTheListenerConnectionDropping(t *testing.T) {
	t.Parallel()
	b, svc, hub := waitSetup(t, 8)
	ctx := context.Background()
	claim := hold(t, svc, b.org, "k", 30*time.Second)
	res := waitAsync(svc, hub, b, "k", 30*time.Second, 20*time.Second)
	time.Sleep(200 * time.Millisecond)
	// Cut the hub's connection, and complete while it is down: the
	// notification is lost, and the reconnect must wake the waiter.
	var killed int
	if err := b.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminating the listener: %d, %v", killed, err)
	}
	if ok, err := svc.Complete(ctx, claim, answer("done")); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	r := <-res
	if r.err != nil || r.elapsed > 10*time.Second {
		t.Fatalf("ClaimWait = %v in %v", r.err, r.elapsed)
	}
	wantCompleted(t, r.out, "done")
}

func TestManyWaitersAreAllAnsweredOnBoundedConnections(t *testing.T) {
	t.Parallel()
	const waiters, poolSize = 200, 10
	b, svc, hub := waitSetup(t, poolSize)
	ctx := context.Background()
	claim := hold(t, svc, b.org, "k", 30*time.Second)
	results := make([]waitResult, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = <-waitAsync(svc, hub, b, "k", 30*time.Second, 25*time.Second)
		}()
	}
	time.Sleep(time.Second) // every waiter has met the live lease and sleeps
	var conns int
	// Client sessions: on Citus the coordinator's database also holds the
	// sessions of the nodes' maintenance daemons (application_name
	// citus_internal ...), which are not the service's.
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND backend_type = 'client backend' AND application_name NOT LIKE 'citus\_internal%'`).Scan(&conns); err != nil {
		t.Fatal(err)
	}
	// The service's pool, the hub's one connection, and this test's own
	// pool (one connection, the one asking).
	if conns > poolSize+1+1 {
		t.Fatalf("%d connections while %d callers wait, want at most %d", conns, waiters, poolSize+2)
	}
	if ok, err := svc.Complete(ctx, claim, answer("done")); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		wantCompleted(t, r.out, "done")
	}
}

func TestClaimWaitWithoutAHubIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.svc.ClaimWait(context.Background(), nil, b.org, startScope, "k", hashA, time.Second, time.Second); err != idempotency.ErrNoHub {
		t.Fatalf("ClaimWait(nil hub) = %v, want ErrNoHub", err)
	}
}

// TestOnlyACompletionSomeoneWaitsForNotifies listens on the channel while
// two saved-search claims complete: the one nobody waited for sends no
// notification (so its commit took no NOTIFY lock), the one a waiter marked
// sends one.
func TestOnlyACompletionSomeoneWaitsForNotifies(t *testing.T) {
	t.Parallel()
	b, svc, hub := waitSetup(t, 8)
	ctx := context.Background()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+idempotency.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	notified := func() bool {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := conn.Conn().WaitForNotification(wctx)
		return err == nil
	}
	claim := func(key string) *idempotency.Claim { return hold(t, svc, b.org, key, 30*time.Second) }

	alone := claim("alone")
	if ok, err := svc.Complete(ctx, alone, answer("alone")); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	if notified() {
		t.Error("a completion nobody waited for notified")
	}

	waited := claim("waited")
	res := waitAsync(svc, hub, b, "waited", 30*time.Second, 20*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for marked := false; !marked && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := b.pool.QueryRow(ctx, `SELECT waited FROM agent.idempotency_keys WHERE key = 'waited'`).Scan(&marked); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := svc.Complete(ctx, waited, answer("waited")); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	if !notified() {
		t.Error("the completion of a claim a waiter marked did not notify")
	}
	if r := <-res; r.err != nil || r.elapsed > 10*time.Second {
		t.Fatalf("waiter = %v after %s, want woken by the completion", r.err, r.elapsed)
	}
}

// TestWaiterIsWokenByTheNotificationWhicheverNodeHoldsTheClaim is issue
// 25.3. On a Citus cluster an organization's claims live on the worker
// that holds its shard, while the hub listens on the coordinator, where
// every replica connects: the plane announces a claim's end on its own
// connection to the coordinator once it committed. For an organization on
// each node that holds shards (one on PostgreSQL), a holder with a 30 s
// lease completes while two callers sleep on it: a control, on a hub that
// never listens, and a waiter on a running hub. The waiter must answer the
// completion well before the lease or its wait would have it read the
// claim again; the control must sleep until its wait runs out, although
// the claim completed long before: nothing but the notification wakes a
// waiter (no poll), so it was the notification that woke the first.
func TestWaiterIsWokenByTheNotificationWhicheverNodeHoldsTheClaim(t *testing.T) {
	t.Parallel()
	b, svc, hub := waitSetup(t, 8)
	deaf := idempotency.NewHub(b.pool.Config().ConnConfig, nil) // never Run
	ctx := context.Background()
	orgs, err := pgtest.OrganizationPerNode(ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	if pgtest.Citus() && len(orgs) < 2 {
		t.Fatalf("organizations on %d nodes, want one on each of the two workers", len(orgs))
	}
	// Long enough that the completion comes well inside it, however busy
	// the machine.
	const controlWait = 15 * time.Second
	for i, org := range orgs {
		t.Run(fmt.Sprintf("node-%d", i), func(t *testing.T) {
			t.Parallel()
			key := fmt.Sprintf("node-%d", i)
			holder := hold(t, svc, org, key, 30*time.Second)
			// asleep starts a waiter on h and returns once it sleeps: its
			// last step before the sleep marks the claim as waited for, an
			// update that gives the row a new version (xmin).
			version := func() (x string) {
				if err := b.pool.QueryRow(ctx, `SELECT xmin::text FROM agent.idempotency_keys
					WHERE organization_id = $1 AND scope = $2 AND key = $3`, org, startScope, key).Scan(&x); err != nil {
					t.Fatal(err)
				}
				return x
			}
			asleep := func(h *idempotency.Hub, d time.Duration) (<-chan waitResult, time.Time) {
				before := version()
				ch := make(chan waitResult, 1)
				started := time.Now()
				go func() {
					out, err := svc.ClaimWait(ctx, h, org, startScope, key, hashA, 30*time.Second, d)
					ch <- waitResult{out, err, time.Since(started)}
				}()
				for deadline := time.Now().Add(10 * time.Second); version() == before; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the waiter never marked the claim")
					}
				}
				return ch, started
			}
			control, controlStarted := asleep(deaf, controlWait)
			woken, _ := asleep(hub, 20*time.Second)
			completed := time.Now()
			if ok, err := svc.Complete(ctx, holder, answer(key)); !ok || err != nil {
				t.Fatalf("Complete = %v, %v", ok, err)
			}
			r := <-woken
			if r.err != nil {
				t.Fatal(r.err)
			}
			wantCompleted(t, r.out, key)
			if after := time.Since(completed); after > 10*time.Second {
				t.Errorf("the waiter answered %v after the completion, want it woken by the notification", after)
			}
			if answered := time.Now(); answered.After(controlStarted.Add(controlWait)) {
				t.Errorf("the waiter answered after the control's wait ran out; the control proves nothing")
			}
			c := <-control
			if c.err != nil || c.elapsed < controlWait {
				t.Errorf("the control waiter (no notification can reach it) answered %v after %v, %v; want it asleep until its %v wait ran out",
					c.out.Kind, c.elapsed, c.err, controlWait)
			}
		})
	}
}
