package console

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/sweeper"
	"github.com/searchd/searchd/tools"
)

// errInvalidCursor is what the operator views answer for a cursor their
// stores did not write.
var errInvalidCursor = errors.New("console: invalid cursor")

// panel is one operator view: its navigation entry and its routes. Every
// route is gated to operator tokens by routes().
type panel struct {
	label, href, section string
	routes               func(c *Console) []route
}

type route struct {
	pattern string
	handler http.HandlerFunc
}

// operatorPanels are the operator's views, in navigation order. A view of
// another part of the plane joins as one more panel with its store in
// Deps, shown when the store is set: "Inbound" (the provider inbox's
// backlog and the applier's lag) and "Uncertain effects" (outbound tool
// calls left uncertain, for a person to mark delivered or to allow one
// retry with the same key) are two.
func (c *Console) operatorPanels() []panel {
	panels := []panel{
		{"Claims", "/console/operator/claims", "operator-claims", func(c *Console) []route {
			return []route{
				{"GET /console/operator/claims", c.claims},
				{"POST /console/operator/claims/{id}/release", c.releaseClaim},
			}
		}},
	}
	if c.d.Inbox != nil {
		panels = append(panels, panel{"Inbound", "/console/operator/inbound", "operator-inbound", func(c *Console) []route {
			return []route{{"GET /console/operator/inbound", c.inbound}}
		}})
	}
	if c.d.Uncertain != nil && c.d.Resolver != nil {
		panels = append(panels, panel{"Uncertain effects", "/console/operator/uncertain", "operator-uncertain", func(c *Console) []route {
			return []route{
				{"GET /console/operator/uncertain", c.uncertain},
				{"POST /console/operator/uncertain/resolve", c.resolve},
			}
		}})
	}
	return append(panels,
		panel{"Force-releases", "/console/operator/releases", "operator-releases", func(c *Console) []route {
			return []route{{"GET /console/operator/releases", c.releases}}
		}},
		panel{"Sweeper", "/console/operator/sweeper", "operator-sweeper", func(c *Console) []route {
			return []route{{"GET /console/operator/sweeper", c.sweeperRuns}}
		}},
	)
}

// chartHours is how far back the claims chart looks.
const chartHours = 24

type claimsPage struct {
	Counts                []operator.ScopeCount
	Total                 operator.ScopeCount
	Chart                 chart
	Stuck, InFlight       []idempotency.Record
	StuckNext, FlightNext string
	StuckCursor           string
	FlightCursor          string
	Org, Scope, Key       string
	// Released is the claim a release just removed; Refused says why a
	// release was refused.
	Released, Refused string
	Filtered          bool
	Now               time.Time
	// CountedAt is when the counts and the chart were read.
	CountedAt time.Time
}

// overviewCache keeps the last overview, so that a page need not wait for
// the scan of the whole plane behind its counts. A copy younger than ttl
// is served as it is. An older one, up to staleFor, is served at once
// while one background read replaces it (stale-while-revalidate): the
// page says when its counts were read. With no copy, or one older than
// staleFor, the page reads afresh, one reader at a time, the others
// waiting for that read.
type overviewCache struct {
	ttl time.Duration
	// staleFor is how old a copy may be and still be served while a
	// background read replaces it; zero serves no stale copy.
	staleFor   time.Duration
	mu         sync.Mutex // held by a foreground read
	state      sync.Mutex // guards the fields below; never held across a read
	at         time.Time
	latest     *operator.Overview
	refreshing bool
}

// overviewRefreshTimeout bounds a background read: it runs after the page
// that started it has answered, so no request's context bounds it.
const overviewRefreshTimeout = 30 * time.Second

// cached returns the copy to serve, if any, and whether a background read
// should start.
func (oc *overviewCache) cached(t time.Time) (ov *operator.Overview, at time.Time, refresh bool) {
	oc.state.Lock()
	defer oc.state.Unlock()
	if oc.latest == nil || oc.ttl <= 0 {
		return nil, time.Time{}, false
	}
	age := t.Sub(oc.at)
	switch {
	case age < oc.ttl:
		return oc.latest, oc.at, false
	case age < oc.staleFor:
		refresh = !oc.refreshing
		oc.refreshing = true
		return oc.latest, oc.at, refresh
	}
	return nil, time.Time{}, false
}

// warm starts a background read when there is no copy to serve at all
// (none yet, or one too old) and no read is running.
func (oc *overviewCache) warm(ctx context.Context, op Operator, now func() time.Time, log *slog.Logger) {
	if oc.ttl <= 0 {
		return
	}
	oc.state.Lock()
	start := !oc.refreshing && (oc.latest == nil || now().Sub(oc.at) >= oc.staleFor)
	if start {
		oc.refreshing = true
	}
	oc.state.Unlock()
	if start {
		go oc.refresh(context.WithoutCancel(ctx), op, now, log)
	}
}

// reread replaces the copy with a read made now, waiting for it: after a
// release, so that the page the operator is sent to shows it and is served
// without a read of its own. A failed read drops the copy instead (the
// page then reads itself).
func (oc *overviewCache) reread(ctx context.Context, op Operator, now func() time.Time) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	t := now()
	ov, err := op.Overview(ctx, chartHours)
	oc.state.Lock()
	defer oc.state.Unlock()
	if err != nil {
		oc.latest = nil
		return
	}
	oc.latest, oc.at = ov, t
}

func (oc *overviewCache) store(ov *operator.Overview, at time.Time) {
	oc.state.Lock()
	defer oc.state.Unlock()
	if oc.latest == nil || at.After(oc.at) {
		oc.latest, oc.at = ov, at
	}
}

func (oc *overviewCache) get(ctx context.Context, op Operator, now func() time.Time, log *slog.Logger) (*operator.Overview, time.Time, error) {
	if ov, at, refresh := oc.cached(now()); ov != nil {
		if refresh {
			go oc.refresh(context.WithoutCancel(ctx), op, now, log)
		}
		return ov, at, nil
	}
	oc.mu.Lock()
	defer oc.mu.Unlock()
	// Another reader may have read while this one waited.
	if ov, at, _ := oc.cached(now()); ov != nil {
		return ov, at, nil
	}
	t := now()
	ov, err := op.Overview(ctx, chartHours)
	if err != nil {
		return nil, time.Time{}, err
	}
	oc.store(ov, t)
	return ov, t, nil
}

// refresh reads the overview in the background and keeps it; a failure
// leaves the old copy to age out, and is logged.
func (oc *overviewCache) refresh(ctx context.Context, op Operator, now func() time.Time, log *slog.Logger) {
	defer func() {
		oc.state.Lock()
		oc.refreshing = false
		oc.state.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, overviewRefreshTimeout)
	defer cancel()
	t := now()
	ov, err := op.Overview(ctx, chartHours)
	if err != nil {
		log.Warn("console: background read of the claims overview failed", "error", err)
		return
	}
	oc.store(ov, t)
}

func (c *Console) claims(w http.ResponseWriter, r *http.Request) {
	f := newFilters(r)
	org := f.id("org")
	p := claimsPage{Scope: f.text("scope", maxFilterLen), Key: f.text("key", maxFilterLen),
		StuckCursor: f.cursor("stuck"), FlightCursor: f.cursor("flight"),
		Released: f.text("released", 64), Refused: f.text("refused", 500)}
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	if org.String() != zeroUUID {
		p.Org = org.String()
	}
	p.Filtered = p.Org != "" || p.Scope != "" || p.Key != ""
	ctx := r.Context()
	// The overview (a scan of the plane, when not cached) and the two
	// lists (index ranges) are read at once: the page waits for the
	// slowest, not for the sum.
	var (
		wg     sync.WaitGroup
		ov     *operator.Overview
		readAt time.Time
		ovErr  error
	)
	wg.Go(func() { ov, readAt, ovErr = c.overview.get(ctx, c.d.Operator, c.now, c.log) })
	filter := operator.ClaimFilter{OrganizationID: org, Scope: p.Scope, Key: p.Key}
	var stuckErr, flightErr error
	p.Stuck, p.StuckNext, stuckErr = c.d.Operator.Stuck(ctx, filter, operator.PageParams{Limit: pageSize, Cursor: p.StuckCursor})
	if stuckErr == nil {
		p.InFlight, p.FlightNext, flightErr = c.d.Operator.InFlight(ctx, filter, operator.PageParams{Limit: pageSize, Cursor: p.FlightCursor})
	}
	wg.Wait()
	if c.operatorFailed(w, r, cmp.Or(ovErr, stuckErr, flightErr)) {
		return
	}
	p.CountedAt = readAt
	p.Counts = ov.Counts
	for _, sc := range ov.Counts {
		p.Total.Completed += sc.Completed
		p.Total.InFlight += sc.InFlight
		p.Total.Stuck += sc.Stuck
		p.Total.Expired += sc.Expired
	}
	now := c.now()
	p.Now = now
	p.Chart = buildChart(ov.Buckets, now, chartHours)
	c.render(w, r, http.StatusOK, "claims", "Claims", p)
}

// releaseClaim force-releases a stuck claim: the same rules as `searchd
// claims release` (operator.Store.ForceRelease), with the session's actor
// recorded, and two guards more: the lease must have passed, and the claim
// must still be the one the operator saw (its claimed_at, which a reclaim
// moves, is in the form).
func (c *Console) releaseClaim(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id, ok := pathID(r)
	if !ok {
		c.notFound(w, r)
		return
	}
	back := func(key, value string) {
		http.Redirect(w, r, "/console/operator/claims?"+url.Values{key: {value}}.Encode(), http.StatusSeeOther)
	}
	reason, err := operator.CheckReason(r.PostFormValue("reason"))
	if err != nil {
		back("refused", strings.TrimPrefix(err.Error(), operator.ErrInvalid.Error()+": "))
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
		back("refused", "the claim is gone already: it was released, or reclaimed and completed, since the page was loaded")
		return
	case err != nil:
		c.internal(w, r, err)
		return
	case !rec.ClaimedAt.Equal(seen):
		back("refused", "the claim changed since the page was loaded (a worker reclaimed it); look again before releasing")
		return
	}
	_, err = c.d.Operator.ForceRelease(r.Context(), rec, operator.ReleaseParams{
		Actor: s.Actor, Reason: reason, Via: operator.ViaConsole, RequirePassedLease: true})
	switch {
	case errors.Is(err, operator.ErrCompletedClaim):
		back("refused", "the claim is completed: it is the answer every repeat of its key replays, and is never released")
	case errors.Is(err, operator.ErrLeaseLive):
		back("refused", "the claim's lease is live again: a worker holds it")
	case errors.Is(err, operator.ErrClaimChanged):
		back("refused", "the claim changed as it was being released; nothing was released")
	case err != nil:
		c.internal(w, r, err)
	default:
		c.overview.reread(r.Context(), c.d.Operator, c.now)
		c.log.WarnContext(r.Context(), "claim force-released by an operator in the console",
			"claim_id", rec.ID.String(), "organization_id", rec.OrganizationID.String(),
			"scope", rec.Scope, "actor", s.Actor, "reason", reason)
		back("released", rec.ID.String())
	}
}

type releasesPage struct {
	Releases     []operator.Release
	Org, Actor   string
	Cursor, Next string
}

func (c *Console) releases(w http.ResponseWriter, r *http.Request) {
	f := newFilters(r)
	org := f.id("org")
	p := releasesPage{Actor: f.text("actor", maxFilterLen), Cursor: f.cursor("cursor")}
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	if org.String() != zeroUUID {
		p.Org = org.String()
	}
	list, next, err := c.d.Operator.Releases(r.Context(), operator.ReleaseFilter{OrganizationID: org, Actor: p.Actor},
		operator.PageParams{Limit: pageSize, Cursor: p.Cursor})
	if c.operatorFailed(w, r, err) {
		return
	}
	p.Releases, p.Next = list, next
	c.render(w, r, http.StatusOK, "releases", "Force-releases", p)
}

type sweeperPage struct {
	Runs         []sweeper.RunEntry
	BacklogOnly  bool
	Cursor, Next string
	// Latest is the newest run, and Warning says it left a backlog.
	Latest  *sweeper.RunEntry
	Warning bool
	Now     time.Time
}

func (c *Console) sweeperRuns(w http.ResponseWriter, r *http.Request) {
	f := newFilters(r)
	p := sweeperPage{BacklogOnly: f.oneOf("backlog", "1") == "1", Cursor: f.cursor("cursor"), Now: c.now()}
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	list, next, err := c.d.SweeperRuns.List(r.Context(), p.BacklogOnly, pageSize, p.Cursor)
	if c.operatorFailed(w, r, err) {
		return
	}
	p.Runs, p.Next = list, next
	latest, _, err := c.d.SweeperRuns.List(r.Context(), false, 1, "")
	if c.operatorFailed(w, r, err) {
		return
	}
	if len(latest) == 1 {
		p.Latest = &latest[0]
		p.Warning = latest[0].Backlog
	}
	c.render(w, r, http.StatusOK, "sweeper", "Sweeper", p)
}

// operatorFailed is readFailed for the operator's stores.
func (c *Console) operatorFailed(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case errors.Is(err, operator.ErrInvalidCursor), errors.Is(err, sweeper.ErrInvalidCursor), errors.Is(err, tools.ErrInvalidCursor),
		errors.Is(err, providerjobs.ErrInvalidCursor):
		err = errInvalidCursor
	case errors.Is(err, operator.ErrInvalid):
		c.badFilters(w, r, errors.New(strings.TrimPrefix(err.Error(), operator.ErrInvalid.Error()+": ")))
		return true
	}
	return c.readFailed(w, r, err)
}
