package toolrun_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/toolrun"
	"github.com/searchd/searchd/toolrun/email"
	"github.com/searchd/searchd/toolrun/email/emailtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// opts shape a test's world.
type opts struct {
	// idempotent: the vendor dedupes by Idempotency-Key, and the spec says
	// so.
	idempotent bool
	// timeout is the tool's Timeout; default 5 s.
	timeout time.Duration
	// delay is how long the vendor takes to send.
	delay time.Duration
	// dbClock runs the plane on the database clock instead of the stub.
	dbClock bool
}

// bundle is what setup hands a test.
type bundle struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	plane  *idempotency.Service
	clock  *dbclocktest.Stub // the plane runs every statement at its Now
	runner *toolrun.Runner
	vendor *emailtest.Vendor
	sender *email.Sender
	org    uuid.UUID
	run    uuid.UUID
}

// setup gives a test its own migrated database, a journal on it, a local
// vendor and an email.send tool pointed at the vendor.
func setup(t *testing.T, o opts) *bundle {
	t.Helper()
	pool := pgtest.NewDB(t)
	c := dbclocktest.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	cfg := idempotency.Config{Clock: c.Clock()}
	if o.dbClock {
		cfg = idempotency.Config{}
	}
	plane := idempotency.NewService(pool, cfg)
	vendor := emailtest.NewVendor(t, emailtest.Options{Idempotent: o.idempotent, Delay: o.delay})
	sender, err := email.New(email.Config{
		BaseURL:           vendor.URL(),
		APIKey:            "test-key",
		Timeout:           cmp.Or(o.timeout, 5*time.Second),
		VendorIdempotency: o.idempotent,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{
		ctx:    context.Background(),
		pool:   pool,
		plane:  plane,
		clock:  c,
		runner: toolrun.NewRunner(plane, toolrun.Config{}),
		vendor: vendor,
		sender: sender,
		org:    uuid.New(),
		run:    uuid.New(),
	}
}

// call is the occurrence-th email.send of input in the bundle's Run.
func (b *bundle) call(input string, occurrence int) toolrun.Call {
	return toolrun.Call{
		OrganizationID: b.org,
		RunID:          b.run,
		Spec:           b.sender.Spec(),
		Tool:           b.sender,
		Input:          json.RawMessage(input),
		Occurrence:     occurrence,
		ToolCallID:     "call_" + uuid.NewString(),
	}
}

// key is the journal key of c.
func (b *bundle) key(t *testing.T, c toolrun.Call) string {
	t.Helper()
	k, err := toolrun.Key(c.RunID, c.Spec.Name, c.Input, c.Occurrence)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// execute runs c with policy and fails the test on an error.
func (b *bundle) execute(t *testing.T, c toolrun.Call, policy toolrun.Checkpoint) toolrun.Result {
	t.Helper()
	res, err := b.runner.Execute(b.ctx, c, policy)
	if err != nil {
		t.Fatalf("Execute(%s #%d) error: %v", c.Spec.Name, c.Occurrence, err)
	}
	return res
}

// rowCount counts the stored claims.
func (b *bundle) rowCount(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(b.ctx, `SELECT count(*) FROM agent.idempotency_keys`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// race runs f(0) to f(n-1) at once, each in its own goroutine released
// together, and waits for them. It opens n connections up front, so they
// race on the database rather than queue behind connection set-up.
func (b *bundle) race(t *testing.T, n int, f func(i int)) {
	t.Helper()
	conns := make([]*pgxpool.Conn, 0, n)
	for range n {
		conn, err := b.pool.Acquire(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		conn.Release()
	}
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			f(i)
		})
	}
	start.Done()
	done.Wait()
}

// row reads the stored claim of c, or nil.
func (b *bundle) row(t *testing.T, c toolrun.Call) *idempotency.Record {
	t.Helper()
	rec, err := b.plane.Repository().Get(b.ctx, b.org, c.Spec.Scope(), b.key(t, c))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// wantCounts fails the test unless the vendor received requests requests
// and sent messages messages.
func (b *bundle) wantCounts(t *testing.T, requests, messages int) {
	t.Helper()
	if r, m := len(b.vendor.Requests()), len(b.vendor.Messages()); r != requests || m != messages {
		t.Fatalf("vendor saw %d requests and sent %d messages, want %d and %d", r, m, requests, messages)
	}
}

// wantSent fails the test unless res is a fresh, OK send of message id.
func wantSent(t *testing.T, res toolrun.Result, id string) {
	t.Helper()
	if !res.OK || res.Outcome != toolrun.OutcomeOK || res.ResourceType != email.ResourceType || res.ResourceID != id || res.Replayed {
		t.Fatalf("result = %+v, want a fresh ok send of %s", res, id)
	}
	if want := `{"message_id":"` + id + `"}`; string(res.Output) != want {
		t.Fatalf("output = %s, want %s", res.Output, want)
	}
}

// wantReplay fails the test unless res is live replayed.
func wantReplay(t *testing.T, res, live toolrun.Result) {
	t.Helper()
	live.Replayed = true
	if !res.Replayed || !equalResults(res, live) {
		t.Fatalf("replay = %+v, want %+v", res, live)
	}
}

func equalResults(a, b toolrun.Result) bool {
	return a.OK == b.OK && a.Outcome == b.Outcome && string(a.Output) == string(b.Output) &&
		a.Message == b.Message && a.ResourceType == b.ResourceType && a.ResourceID == b.ResourceID &&
		a.OutputOmitted == b.OutputOmitted && a.Replayed == b.Replayed && a.ResolvedBy == b.ResolvedBy
}

// policy is a checkpoint that answers decision and counts how often it was
// asked.
type policy struct {
	mu       sync.Mutex
	decision toolrun.Decision
	err      error
	asked    int
}

func (p *policy) check(context.Context, toolrun.Call) (toolrun.Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	return p.decision, p.err
}

func (p *policy) set(d toolrun.Decision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.decision = d
}

func (p *policy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked
}

// toolFunc adapts a function to a toolrun.Tool.
type toolFunc func(ctx context.Context, cc toolrun.CallContext, input json.RawMessage) (toolrun.Result, error)

func (f toolFunc) Call(ctx context.Context, cc toolrun.CallContext, input json.RawMessage) (toolrun.Result, error) {
	return f(ctx, cc, input)
}

// wantInFlight fails the test unless err is the in-flight error of a live
// claim and res carries nothing.
func wantInFlight(t *testing.T, res toolrun.Result, err error) {
	t.Helper()
	var ife *idempotency.InFlightError
	if !errors.Is(err, toolrun.ErrClaimInFlight) || !errors.As(err, &ife) || ife.RetryAfter <= 0 {
		t.Fatalf("error = %v, want an *idempotency.InFlightError with a positive RetryAfter", err)
	}
	if !equalResults(res, toolrun.Result{}) {
		t.Fatalf("an in-flight call reported the result %+v", res)
	}
}
