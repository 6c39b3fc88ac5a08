package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/snapshot"
)

// pageSize is the rows of every list page.
const pageSize = 50

// itemsPageSize is the baseline items a page shows: of a saved search's or
// a snapshot's baseline, and of each side of a compared baseline.
const itemsPageSize = 200

// The auditor's views. Each reads with the organization of the session,
// so another organization's record answers not found, exactly as on /v1.

type savedSearchesPage struct {
	Items        []savedsearch.AuditSummary
	Name         string
	Archived     bool
	Cursor, Next string
}

func (c *Console) savedSearches(r *http.Request, f *filters) (view, error) {
	p := savedSearchesPage{Name: f.text("name", maxNameLen), Archived: f.oneOf("archived", "1") == "1", Cursor: f.cursor("cursor")}
	err := f.err()
	if err == nil {
		p.Items, p.Next, err = c.d.SavedSearches.ListAll(r.Context(), orgOf(r),
			savedsearch.AuditListParams{Name: p.Name, IncludeArchived: p.Archived, Limit: pageSize, Cursor: p.Cursor})
	}
	return view{"saved-searches", "Saved searches", p}, err
}

// itemsPage is a page of a baseline's items, after position ItemsAt;
// ItemsNext continues them (0 on the last page).
type itemsPage struct {
	Items              []string
	ItemsAt, ItemsNext int64
}

type savedSearchPage struct {
	Search *savedsearch.Entry
	itemsPage
	Timeline     []snapshot.TimelineEntry
	Actor        string
	From, To     string
	Cursor, Next string
	// Runs are the newest Runs of the saved search.
	Runs []runs.Run
	// Schedules says whether the console reads schedules at all;
	// Schedule is the saved search's (nil when it has none), Occurrences a
	// page of its occurrences, latest due first, from OccCursor.
	Schedules          bool
	Schedule           *schedule.Schedule
	Occurrences        []schedule.Occurrence
	OccCursor, OccNext string
}

func (c *Console) savedSearch(r *http.Request, f *filters) (view, error) {
	ctx, org, id := r.Context(), orgOf(r), pathID(r)
	from, to := f.time("from"), f.time("to")
	p := savedSearchPage{Actor: f.text("actor", maxFilterLen), From: localInput(from), To: localInput(to),
		Cursor: f.cursor("cursor"), itemsPage: itemsPage{ItemsAt: f.position("items")}, OccCursor: f.cursor("occ")}
	if err := f.err(); err != nil {
		return view{}, err
	}
	var err error
	if p.Search, err = c.d.SavedSearches.GetEntry(ctx, org, id); err != nil {
		return view{}, err
	}
	if p.Items, p.ItemsNext, err = c.d.SavedSearches.BaselineItems(ctx, org, id, p.ItemsAt, itemsPageSize); err != nil {
		return view{}, err
	}
	if p.Timeline, p.Next, err = c.d.Snapshots.Timeline(ctx, org, id,
		snapshot.TimelineParams{Actor: p.Actor, From: from, To: to, Limit: pageSize, Cursor: p.Cursor}); err != nil {
		return view{}, err
	}
	if p.Runs, _, err = c.d.Runs.Search(ctx, org, runs.SearchParams{SavedSearchID: id, Limit: 10}); err != nil {
		return view{}, err
	}
	if c.d.Schedules != nil {
		p.Schedules = true
		if p.Schedule, err = c.d.Schedules.Get(ctx, org, id); err != nil && !errors.Is(err, schedule.ErrNotFound) {
			return view{}, err
		}
		p.Occurrences, p.OccNext, err = c.d.Schedules.Occurrences(ctx, org, id, schedule.ListParams{Limit: pageSize, Cursor: p.OccCursor})
	}
	return view{"saved-search", p.Search.Name, p}, err
}

type schedulesPage struct {
	Schedules    []schedule.Summary
	Cursor, Next string
}

// schedules is the organization's schedules overview: each schedule with
// its saved search, cadence, next occurrence, state and the outcome of its
// latest occurrence, the newest set first.
func (c *Console) schedules(r *http.Request, f *filters) (view, error) {
	p := schedulesPage{Cursor: f.cursor("cursor")}
	err := f.err()
	if err == nil {
		p.Schedules, p.Next, err = c.d.Schedules.List(r.Context(), orgOf(r), schedule.ListParams{Limit: pageSize, Cursor: p.Cursor})
	}
	return view{"schedules", "Schedules", p}, err
}

type comparePage struct {
	Search *savedsearch.Entry
	Diff   snapshotDiff
	// AddedAt and RemovedAt are where the pages of added and removed
	// items start (positions in the newer and the older baseline).
	AddedAt, RemovedAt int64
}

func (c *Console) compare(r *http.Request, f *filters) (view, error) {
	ctx, org, id := r.Context(), orgOf(r), pathID(r)
	a, b := f.id("a"), f.id("b")
	if a == uuid.Nil || b == uuid.Nil {
		f.bad("a, b", "choose two snapshots to compare")
	}
	p := comparePage{AddedAt: f.position("added"), RemovedAt: f.position("removed")}
	if err := f.err(); err != nil {
		return view{}, err
	}
	var err error
	if p.Search, err = c.d.SavedSearches.GetEntry(ctx, org, id); err != nil {
		return view{}, err
	}
	sa, err := c.d.Snapshots.Header(ctx, org, a)
	if err != nil {
		return view{}, err
	}
	sb, err := c.d.Snapshots.Header(ctx, org, b)
	switch {
	case err != nil:
		return view{}, err
	case sa.SavedSearchID != id || sb.SavedSearchID != id:
		return view{}, errNotFound
	}
	older, newer := olderFirst(sa, sb)
	baseline, err := c.d.Snapshots.DiffBaselines(ctx, org, older.ID, newer.ID,
		snapshot.DiffParams{AddedAfter: p.AddedAt, RemovedAfter: p.RemovedAt, Limit: itemsPageSize})
	p.Diff = diffBriefs(older, newer, baseline)
	return view{"compare", "Compare snapshots", p}, err
}

type snapshotPage struct {
	Snapshot *snapshot.Header
	itemsPage
	Runs         []runs.Run
	Cursor, Next string
}

func (c *Console) snapshot(r *http.Request, f *filters) (view, error) {
	ctx, org, id := r.Context(), orgOf(r), pathID(r)
	p := snapshotPage{Cursor: f.cursor("cursor"), itemsPage: itemsPage{ItemsAt: f.position("items")}}
	if err := f.err(); err != nil {
		return view{}, err
	}
	var err error
	if p.Snapshot, err = c.d.Snapshots.Header(ctx, org, id); err != nil {
		return view{}, err
	}
	if p.Items, p.ItemsNext, err = c.d.Snapshots.BaselineItems(ctx, org, id, p.ItemsAt, itemsPageSize); err != nil {
		return view{}, err
	}
	p.Runs, p.Next, err = c.d.Runs.Search(ctx, org,
		runs.SearchParams{SnapshotID: id, SavedSearchID: p.Snapshot.SavedSearchID, Limit: pageSize, Cursor: p.Cursor})
	return view{"snapshot", "Snapshot v" + strconv.FormatInt(p.Snapshot.SavedSearchVersion, 10), p}, err
}

type runsPage struct {
	Runs               []runs.Run
	Actor, Key, Status string
	From, To           string
	SavedSearch        string
	Cursor, Next       string
	Statuses           []string
}

var runStatuses = []string{"queued", "dispatched", "running", "succeeded", "failed", "cancelled"}

func (c *Console) runs(r *http.Request, f *filters) (view, error) {
	from, to, ssID := f.time("from"), f.time("to"), f.id("saved_search")
	p := runsPage{
		Actor: f.text("actor", maxFilterLen), Key: f.text("key", maxFilterLen),
		Status: f.oneOf("status", runStatuses...), Cursor: f.cursor("cursor"), Statuses: runStatuses,
		From: localInput(from), To: localInput(to), SavedSearch: idText(ssID),
	}
	err := f.err()
	if err == nil {
		p.Runs, p.Next, err = c.d.Runs.Search(r.Context(), orgOf(r), runs.SearchParams{
			SavedSearchID: ssID, Actor: p.Actor, Key: p.Key, Status: p.Status, From: from, To: to,
			Limit: pageSize, Cursor: p.Cursor,
		})
	}
	return view{"runs", "Runs", p}, err
}

type runPage struct {
	Run *runs.Run
	// InputBytes is the size of the stored input; Run.Input is nil when
	// it is over runs.AuditInputBytes (stored before the limit existed).
	InputBytes int64
	Snapshot   *snapshot.Header
	Jobs       []providerjobs.Job
	Timeline   *runTimeline
	// Key is the Idempotency-Key the Run was started with.
	Key string
	// Retry is the retry form's state after a refused retry; nil
	// otherwise. Retried is the latest retry of the dispatch, as
	// recorded, when the page was sent back after one (?dispatch=retried):
	// announced from the record, never from the link.
	Retry   *retryForm
	Retried *dispatch.Retry
	// Events is the path of the Run's event stream, which console.js
	// follows to update the page; "" when the Run finished or the console
	// serves no streams.
	Events string
}

func (c *Console) run(r *http.Request, f *filters) (view, error) {
	ctx, org, id := r.Context(), orgOf(r), pathID(r)
	run, inputBytes, err := c.d.Runs.GetAudit(ctx, org, id)
	if err != nil {
		return view{}, err
	}
	p := runPage{Run: run, InputBytes: inputBytes, Key: idempotencyKey(run.StartKey)}
	if c.d.Streams != nil && !runs.Terminal(run.Status) {
		// console.js follows the Run from here (stream.go), from the
		// version this page shows.
		p.Events = "/console/runs/" + id.String() + "/events"
	}
	if run.SnapshotID != nil {
		if p.Snapshot, err = c.d.Snapshots.Header(ctx, org, *run.SnapshotID); err != nil && !errors.Is(err, snapshot.ErrNotFound) {
			return view{}, err
		}
	}
	if p.Jobs, _, err = c.d.JobAudit.Jobs(ctx, org, providerjobs.JobListParams{RunID: id, Limit: 200}); err != nil {
		return view{}, err
	}
	if p.Timeline, err = c.timeline(ctx, run, c.now()); err != nil {
		return view{}, err
	}
	if rs := p.Timeline.Retries; len(rs) > 0 && r.URL.Query().Get("dispatch") == "retried" {
		p.Retried = &rs[len(rs)-1]
	}
	return view{"run", "Run " + shortID(id), p}, nil
}

type jobsPage struct {
	Jobs             []providerjobs.Job
	Provider, Status string
	Run              string
	Cursor, Next     string
	Statuses         []string
}

var jobStatuses = []string{"pending", "running", "succeeded", "failed"}

func (c *Console) providerJobs(r *http.Request, f *filters) (view, error) {
	run := f.id("run")
	p := jobsPage{Provider: f.text("provider", maxFilterLen), Status: f.oneOf("status", jobStatuses...),
		Cursor: f.cursor("cursor"), Statuses: jobStatuses, Run: idText(run)}
	err := f.err()
	if err == nil {
		p.Jobs, p.Next, err = c.d.JobAudit.Jobs(r.Context(), orgOf(r), providerjobs.JobListParams{
			RunID: run, Provider: p.Provider, Status: providerjobs.Status(p.Status), Limit: pageSize, Cursor: p.Cursor})
	}
	return view{"provider-jobs", "Provider jobs", p}, err
}

type jobPage struct {
	Job *providerjobs.Job
	// ResultBytes is the size of the stored result; Job.Result is nil
	// when it is over providerjobs.AuditResultBytes.
	ResultBytes  int64
	Deliveries   []providerjobs.AppliedDelivery
	Drops        []providerjobs.Drop
	Cursor, Next string
}

func (c *Console) providerJob(r *http.Request, f *filters) (view, error) {
	ctx, org, id := r.Context(), orgOf(r), pathID(r)
	p := jobPage{Cursor: f.cursor("cursor")}
	if err := f.err(); err != nil {
		return view{}, err
	}
	var err error
	if p.Job, p.ResultBytes, err = c.d.JobAudit.Job(ctx, org, id); err != nil {
		return view{}, err
	}
	if p.Deliveries, err = c.d.JobAudit.Deliveries(ctx, p.Job, 200); err != nil {
		return view{}, err
	}
	p.Drops, p.Next, err = c.d.JobAudit.Drops(ctx, org, id, pageSize, p.Cursor)
	return view{"provider-job", "Provider job " + p.Job.ProviderJobID, p}, err
}

// view is a page as its handler read it: its template, title and data.
type view struct {
	name, title string
	data        any
}

// viewFunc reads the page r asks for, with its query's filters f. An error
// decides the page instead (see readFailed): f's problems, a path that
// names nothing, a read's failure.
type viewFunc func(r *http.Request, f *filters) (view, error)

// show serves the page v reads.
func (c *Console) show(v viewFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := v(r, newFilters(r))
		if !c.readFailed(w, r, err) {
			c.render(w, r, http.StatusOK, p.name, p.title, p.data)
		}
	}
}

// errNotFound is a page that names nothing: a path id that is not a UUID
// (as in the API), or records that do not belong together.
var errNotFound = errors.New("console: not found")

// readFailed renders the page an error of a read deserves and reports
// whether there was one: not found for another organization's records, a
// 400 for filters or a cursor the store did not write, else a logged 500.
func (c *Console) readFailed(w http.ResponseWriter, r *http.Request, err error) bool {
	const badFilters = "Filters not understood"
	switch {
	case err == nil:
		return false
	case errors.As(err, new(filterError)), errors.Is(err, savedsearch.ErrInvalid):
		c.fail(w, r, http.StatusBadRequest, badFilters, err.Error())
	case errors.Is(err, operator.ErrInvalid):
		c.fail(w, r, http.StatusBadRequest, badFilters, strings.TrimPrefix(err.Error(), operator.ErrInvalid.Error()+": "))
	case errors.Is(err, errNotFound), errors.Is(err, savedsearch.ErrNotFound), errors.Is(err, snapshot.ErrNotFound),
		errors.Is(err, runs.ErrNotFound), errors.Is(err, providerjobs.ErrNotFound),
		errors.Is(err, schedule.ErrSavedSearchNotFound):
		c.notFound(w, r)
	case errors.Is(err, keyset.ErrInvalid): // every list's cursor, decoded in one place
		c.fail(w, r, http.StatusBadRequest, "Page not found", "That page link is not one of this console's. Start again from the first page.")
	case errors.As(err, new(*seatq.Refusal)):
		c.seatRefused(w, r, err) // the claims' counts were refused a seat
	default:
		c.internal(w, r, err)
	}
	return true
}

// idempotencyKey returns the Idempotency-Key of a start key, less its
// namespace.
func idempotencyKey(startKey string) string {
	for _, p := range []string{"saved_search:", "direct:"} {
		if k, ok := strings.CutPrefix(startKey, p); ok && k != "" {
			return k
		}
	}
	return startKey
}
