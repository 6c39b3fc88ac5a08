package console

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/singleflight"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/sweeper"
)

// panel is one operator view at /console/operator/<name>; routes() gates
// it to operators.
type panel struct {
	label, name string
	page        viewFunc
	more        []route
}

type route struct {
	pattern string
	handler http.HandlerFunc
}

// operatorPanels are the operator's views in navigation order, leaving
// out panels whose stores are nil.
func (c *Console) operatorPanels() []panel {
	panels := []panel{{"Claims", "claims", c.claims, []route{
		{"GET /console/operator/claims/counts", c.claimCounts},
		{"POST /console/operator/claims/{id}/release", c.releaseClaim},
	}}, {"Inbound", "inbound", c.inbound, nil}}
	if c.d.Uncertain != nil && c.d.Resolver != nil {
		panels = append(panels, panel{"Tool calls to decide", "uncertain", c.uncertain,
			[]route{{"POST /console/operator/uncertain/resolve", c.resolve}}})
	}
	return append(panels, panel{"Force-releases", "releases", c.releases, nil}, panel{"Sweeper", "sweeper", c.sweeperRuns, nil})
}

// chartHours is how far back the claims chart looks.
const chartHours = 24

type claimsPage struct {
	Overview                  countsView
	Stuck, InFlight           []idempotency.Record
	StuckNext, FlightNext     string
	StuckCursor, FlightCursor string
	Org, Scope, Key           string
	// Released is the recorded release the page returns with; Refused
	// says why a release was refused (outcome.go).
	Released *operator.Release
	Refused  string
	Filtered bool
	Seats    seatsView
}

// seatsView shows the shared seat queue's seats and flows, with
// organization ids, which the metrics never carry.
type seatsView struct {
	seatq.Stats
	// MaxWait and QueueLength are the queue's bounds.
	MaxWait     time.Duration
	QueueLength int
	// More is how many flows the table leaves out.
	More int
}

// seatRows bounds the flows the claims page lists.
const seatRows = 20

func (c *Console) seatsView() seatsView {
	q := c.d.Seats
	st := q.Stats(seatRows)
	return seatsView{Stats: st, MaxWait: q.MaxWait(), QueueLength: q.QueueLength(), More: st.FlowsTotal - len(st.Flows)}
}

// countsView is the claims page's counts by scope and state, and its
// chart. While Counting, the page fills them in from [Console.claimCounts].
type countsView struct {
	Counting bool
	// CountedAt is when the counts and the chart were read.
	CountedAt time.Time
	Scopes    []operator.ScopeCount
	Total     operator.ScopeCount
	Chart     charts
}

// newCountsView lays out ov, read at readAt; nil is still counting.
func newCountsView(ov *operator.Overview, readAt, now time.Time) countsView {
	if ov == nil {
		return countsView{Counting: true}
	}
	v := countsView{CountedAt: readAt, Scopes: ov.Counts, Chart: charts{Wide: buildChart(ov.Buckets, now, chartHours, chartWidth),
		Narrow: buildChart(ov.Buckets, now, chartHours, chartNarrowWidth)}}
	for _, sc := range ov.Counts {
		v.Total.Completed += sc.Completed
		v.Total.InFlight += sc.InFlight
		v.Total.Stuck += sc.Stuck
		v.Total.Expired += sc.Expired
	}
	return v
}

// overviewCache keeps the last overview (a full table scan) with
// stale-while-revalidate: fresh within ttl, served while one background
// read refreshes it up to staleFor, and beyond that a page waits at most
// wait for a read before rendering without counts.
type overviewCache struct {
	// A negative wait waits until the read lands.
	ttl, staleFor, wait time.Duration
	// c reads with its Operator, at its clock, seated in its Seats.
	c *Console
	// reads runs one read at a time; its result is an overviewRead.
	reads singleflight.Group

	mu     sync.Mutex // guards the fields below; never held across a read
	at     time.Time
	latest *operator.Overview
}

// overviewRead is one read's overview and when it was read.
type overviewRead struct {
	ov *operator.Overview
	at time.Time
}

// overviewReadTimeout bounds a read, which outlives its request.
const overviewReadTimeout = 30 * time.Second

// start starts a read or joins the running one.
func (oc *overviewCache) start(ctx context.Context) <-chan singleflight.Result {
	return oc.reads.DoChan("", func() (any, error) { return oc.read(context.WithoutCancel(ctx)) })
}

// read reads and keeps the overview; a failure is logged and the old
// copy ages out.
func (oc *overviewCache) read(ctx context.Context) (_ overviewRead, err error) {
	ctx, cancel := context.WithTimeout(ctx, overviewReadTimeout)
	defer cancel()
	defer func() {
		if err != nil {
			oc.c.log.Warn("console: read of the claims overview failed", "error", err)
		}
	}()
	if started := seatq.FromContext(ctx); started != nil {
		// Its own seat under the starter's flow: the read outlives the
		// starter's seat, and the page may hold one while it waits.
		seat, err := oc.c.d.Seats.Acquire(ctx, started.Flow(), 1)
		if err != nil {
			return overviewRead{}, err
		}
		defer seat.Release()
	}
	r := overviewRead{at: oc.c.now()}
	if r.ov, err = oc.c.d.Operator.Overview(ctx, chartHours); err == nil {
		oc.mu.Lock()
		oc.storeLocked(r.ov, r.at)
		oc.mu.Unlock()
	}
	return r, err
}

// warm starts a read when no copy is servable and none is running.
func (oc *overviewCache) warm(ctx context.Context) {
	if oc.ttl <= 0 {
		return
	}
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.latest == nil || oc.c.now().Sub(oc.at) >= oc.staleFor {
		oc.start(ctx)
	}
}

// reread refreshes the copy and waits, after a release, so the next page
// shows it; a failed read drops the copy.
func (oc *overviewCache) reread(ctx context.Context) {
	t := oc.c.now()
	ov, err := oc.c.d.Operator.Overview(ctx, chartHours)
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if err != nil {
		oc.latest = nil
		return
	}
	oc.storeLocked(ov, t)
}

// storeLocked keeps ov read at at, unless the copy is younger.
func (oc *overviewCache) storeLocked(ov *operator.Overview, at time.Time) {
	if oc.latest == nil || at.After(oc.at) {
		oc.latest, oc.at = ov, at
	}
}

// get returns the overview and its read time, or nil when no read landed
// within wait (negative: no limit). Its error is the read's or ctx's.
func (oc *overviewCache) get(ctx context.Context, wait time.Duration) (*operator.Overview, time.Time, error) {
	oc.mu.Lock()
	if age := oc.c.now().Sub(oc.at); oc.latest != nil && oc.ttl > 0 && age < max(oc.ttl, oc.staleFor) {
		if age >= oc.ttl {
			oc.start(ctx) // stale: served while a background read replaces it
		}
		ov, at := oc.latest, oc.at
		oc.mu.Unlock()
		return ov, at, nil
	}
	read := oc.start(ctx)
	oc.mu.Unlock()
	var timeout <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case res := <-read:
		r, _ := res.Val.(overviewRead)
		return r.ov, r.at, res.Err
	case <-timeout:
		return nil, time.Time{}, nil
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	}
}

func (c *Console) claims(r *http.Request, f *filters) (view, error) {
	org := f.id("org")
	p := claimsPage{Org: idText(org), Scope: f.text("scope", maxFilterLen), Key: f.text("key", maxFilterLen),
		StuckCursor: f.cursor("stuck"), FlightCursor: f.cursor("flight"),
		Refused: outcome(r, "release-refused", "refused")}
	if err := f.err(); err != nil {
		return view{}, err
	}
	p.Filtered = p.Org != "" || p.Scope != "" || p.Key != ""
	ctx := r.Context()
	var (
		wg     sync.WaitGroup
		ov     *operator.Overview
		readAt time.Time
		ovErr  error
	)
	wg.Go(func() { ov, readAt, ovErr = c.overview.get(ctx, c.overview.wait) })
	filter := operator.ClaimFilter{OrganizationID: org, Scope: p.Scope, Key: p.Key}
	var stuckErr, flightErr error
	if id, err := uuid.Parse(r.URL.Query().Get("released")); err == nil && id != uuid.Nil {
		var rs []operator.Release
		if rs, _, stuckErr = c.d.Operator.Releases(ctx, operator.ReleaseFilter{ClaimID: id}, operator.PageParams{Limit: 1}); len(rs) == 1 {
			p.Released = &rs[0]
		}
	}
	if stuckErr == nil {
		p.Stuck, p.StuckNext, stuckErr = c.d.Operator.Stuck(ctx, filter, operator.PageParams{Limit: pageSize, Cursor: p.StuckCursor})
	}
	if stuckErr == nil {
		p.InFlight, p.FlightNext, flightErr = c.d.Operator.InFlight(ctx, filter, operator.PageParams{Limit: pageSize, Cursor: p.FlightCursor})
	}
	wg.Wait()
	if err := cmp.Or(ovErr, stuckErr, flightErr); err != nil {
		return view{}, err
	}
	p.Overview = newCountsView(ov, readAt, c.now())
	p.Seats = c.seatsView()
	return view{"claims", "Claims", p}, nil
}

// claimCountsWait bounds [Console.claimCounts]'s wait for the read.
const claimCountsWait = overviewReadTimeout + 5*time.Second

// claimCounts serves the claims page's counts fragment once the read
// lands, for console.js to fill in.
func (c *Console) claimCounts(w http.ResponseWriter, r *http.Request) {
	// It only waits and renders, so it releases its seat at once.
	seatq.Idle(r.Context())
	ctx, cancel := context.WithTimeout(r.Context(), claimCountsWait)
	defer cancel()
	ov, readAt, err := c.overview.get(ctx, -1)
	if err != nil {
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: the claim counts were not read", slog.String("error", err.Error()))
		http.Error(w, "the counts could not be read", http.StatusServiceUnavailable)
		return
	}
	c.execute(w, r, http.StatusOK, "claims", "claim-counts", newCountsView(ov, readAt, c.now()))
}

// releaseClaim force-releases a stuck claim (operator.Store.ForceRelease)
// as the session's actor, requiring a passed lease and the claimed_at the
// operator saw.
func (c *Console) releaseClaim(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id := pathID(r)
	refused := func(code string) { redirectOutcome(w, r, "/console/operator/claims", "refused", code) }
	reason, err := operator.CheckReason(r.PostFormValue("reason"))
	if err != nil {
		refused("reason")
		return
	}
	seen, err := time.Parse(time.RFC3339Nano, r.PostFormValue("claimed_at"))
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "Form not understood", "The release form did not say which claim was seen.")
		return
	}
	rec, err := c.d.Operator.Claim(r.Context(), id)
	switch {
	case errors.Is(err, operator.ErrNotFound):
		refused("gone")
		return
	case err != nil:
		c.internal(w, r, err)
		return
	case !rec.ClaimedAt.Equal(seen):
		refused("changed")
		return
	}
	_, err = c.d.Operator.ForceRelease(r.Context(), rec, operator.ReleaseParams{
		Actor: s.Actor, Reason: reason, Via: operator.ViaConsole, RequirePassedLease: true})
	switch {
	case errors.Is(err, operator.ErrCompletedClaim):
		refused("completed")
	case errors.Is(err, operator.ErrLeaseLive):
		refused("live")
	case errors.Is(err, operator.ErrClaimChanged):
		refused("raced")
	case err != nil:
		c.internal(w, r, err)
	default:
		c.overview.reread(r.Context())
		c.log.WarnContext(r.Context(), "claim force-released by an operator in the console",
			"claim_id", rec.ID.String(), "organization_id", rec.OrganizationID.String(),
			"scope", rec.Scope, "actor", s.Actor, "reason", reason)
		redirectOutcome(w, r, "/console/operator/claims", "released", rec.ID.String())
	}
}

type releasesPage struct {
	Releases     []operator.Release
	Org, Actor   string
	Cursor, Next string
}

func (c *Console) releases(r *http.Request, f *filters) (view, error) {
	org := f.id("org")
	p := releasesPage{Org: idText(org), Actor: f.text("actor", maxFilterLen), Cursor: f.cursor("cursor")}
	err := f.err()
	if err == nil {
		p.Releases, p.Next, err = c.d.Operator.Releases(r.Context(), operator.ReleaseFilter{OrganizationID: org, Actor: p.Actor},
			operator.PageParams{Limit: pageSize, Cursor: p.Cursor})
	}
	return view{"releases", "Force-releases", p}, err
}

type sweeperPage struct {
	Runs         []sweeper.RunEntry
	BacklogOnly  bool
	Cursor, Next string
	// Latest is the newest run, and Warning says it left a backlog.
	Latest  *sweeper.RunEntry
	Warning bool
}

func (c *Console) sweeperRuns(r *http.Request, f *filters) (view, error) {
	p := sweeperPage{BacklogOnly: f.oneOf("backlog", "1") == "1", Cursor: f.cursor("cursor")}
	if err := f.err(); err != nil {
		return view{}, err
	}
	var err error
	if p.Runs, p.Next, err = c.d.SweeperRuns.List(r.Context(), p.BacklogOnly, pageSize, p.Cursor); err != nil {
		return view{}, err
	}
	latest, _, err := c.d.SweeperRuns.List(r.Context(), false, 1, "")
	if len(latest) == 1 {
		p.Latest = &latest[0]
		p.Warning = latest[0].Backlog
	}
	return view{"sweeper", "Sweeper", p}, err
}
