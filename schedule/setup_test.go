package schedule

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// t0 is the tests' starting time: whole seconds, in the future of any
// real clock the database's own writes (snapshots) stamp.
var t0 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// bundle is one test's database, clock and stores, every store at the
// clock.
type bundle struct {
	ctx      context.Context
	db       *pgxpool.Pool
	clock    *dbclocktest.Stub
	plane    *idempotency.Service
	searches *savedsearch.Store
	runs     *runs.Store
	starter  *admission.Starter
	store    *Store
	org      uuid.UUID
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := pgtest.NewDB(t)
	c := dbclocktest.New(t0)
	plane := idempotency.NewService(db, idempotency.Config{Clock: c.Clock()})
	b := &bundle{
		ctx: context.Background(), db: db, clock: c, plane: plane,
		searches: savedsearch.NewStore(db),
		runs:     runs.NewStore(db, runs.Config{Clock: c.Clock()}),
		store:    NewStore(db, c.Clock()),
		org:      uuid.New(),
	}
	var err error
	b.starter, err = admission.NewStarter(admission.Deps{
		Pool: db, Plane: plane, SavedSearches: b.searches, Snapshots: snapshot.NewStore(db), Runs: b.runs,
	}, admission.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// search creates a live saved search.
func (b *bundle) search(t *testing.T) uuid.UUID {
	t.Helper()
	ss, err := b.searches.Create(b.ctx, b.org, savedsearch.CreateParams{
		Name: "rust jobs", Brief: savedsearch.Brief{Query: "rust"}, Actor: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	return ss.ID
}

// schedule sets p on saved search id as "alice".
func (b *bundle) schedule(t *testing.T, id uuid.UUID, p SetParams) *Schedule {
	t.Helper()
	if p.Actor == "" {
		p.Actor = "alice"
	}
	sc, _, err := b.store.Set(b.ctx, b.org, id, p)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// hourlySearch creates a live saved search with an hourly schedule from
// t0, set as "alice".
func (b *bundle) hourlySearch(t *testing.T) uuid.UUID {
	t.Helper()
	id := b.search(t)
	b.schedule(t, id, hourly())
	return id
}

// setupHourly is setup with one hourly-scheduled saved search, id.
func setupHourly(t *testing.T) (*bundle, uuid.UUID) {
	t.Helper()
	b := setup(t)
	return b, b.hourlySearch(t)
}

// hourly is an hourly schedule from t0.
func hourly() SetParams {
	iv, at := int64(3600), t0
	return SetParams{IntervalSeconds: &iv, StartAt: &at}
}

// drainOpts configure a test's drain.
type drainOpts struct {
	start      StartFunc // default: the bundle's starter
	batch      int
	afterStart func(ctx context.Context, o taken) error
}

func (b *bundle) drain(t *testing.T, o drainOpts) *Drain {
	t.Helper()
	start := o.start
	if start == nil {
		start = b.starter.StartSavedSearch
	}
	d, err := NewDrain(DrainDeps{Pool: b.db, Start: start, Runs: b.runs},
		DrainConfig{Clock: b.clock.Clock(), Batch: o.batch, afterStart: o.afterStart})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// tick runs one tick and fails the test on its error.
func (b *bundle) tick(t *testing.T, d *Drain) TickReport {
	t.Helper()
	rep, err := d.Tick(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// occ reads the occurrence of saved search id due at due.
func (b *bundle) occ(t *testing.T, id uuid.UUID, due time.Time) occRow {
	t.Helper()
	var o occRow
	err := b.db.QueryRow(b.ctx, `SELECT status, coalesce(reason, ''), run_id, attempts, next_attempt_at, lease_token IS NOT NULL
		FROM agent.schedule_occurrences WHERE organization_id = $1 AND saved_search_id = $2 AND due_at = $3`,
		b.org, id, due).Scan(&o.status, &o.reason, &o.runID, &o.attempts, &o.nextAttempt, &o.leased)
	if err != nil {
		t.Fatalf("occurrence of %s due %s: %v", id, due.Format(time.RFC3339), err)
	}
	return o
}

type occRow struct {
	status, reason string
	runID          *uuid.UUID
	attempts       int
	nextAttempt    time.Time
	leased         bool
}

// runsOf counts the Runs whose start key is the occurrence's.
func (b *bundle) runsOf(t *testing.T, id uuid.UUID, due time.Time) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM agent.runs WHERE organization_id = $1 AND start_key = $2`,
		b.org, runs.SavedSearchStartKey(IdempotencyKey(id, due)))
}

func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	return pgtest.Count(t, b.db, query, args...)
}

// dues lists the due times of saved search id's occurrences, earliest
// first.
func (b *bundle) dues(t *testing.T, id uuid.UUID) []time.Time {
	t.Helper()
	rows, _ := b.db.Query(b.ctx, `SELECT due_at AT TIME ZONE 'UTC' FROM agent.schedule_occurrences
		WHERE organization_id = $1 AND saved_search_id = $2 ORDER BY due_at`, b.org, id)
	out, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
