package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/snapshot"
)

// pageSize is the rows of every list page.
const pageSize = 50

// The auditor's views. Each reads with the organization of the session's
// token, through the same stores as the API, so another organization's
// record answers not found, exactly as on /v1.

type savedSearchesPage struct {
	Items    []savedsearch.Entry
	Name     string
	Archived bool
	Cursor   string
	Next     string
}

func (c *Console) savedSearches(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	f := newFilters(r)
	p := savedSearchesPage{Name: f.text("name", maxNameLen), Archived: f.oneOf("archived", "1") == "1", Cursor: f.cursor("cursor")}
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	items, next, err := c.d.SavedSearches.ListAll(r.Context(), s.OrganizationID,
		savedsearch.AuditListParams{Name: p.Name, IncludeArchived: p.Archived, Limit: pageSize, Cursor: p.Cursor})
	if c.readFailed(w, r, err) {
		return
	}
	p.Items, p.Next = items, next
	c.render(w, r, http.StatusOK, "saved-searches", "Saved searches", p)
}

type savedSearchPage struct {
	Search   *savedsearch.Entry
	Timeline []snapshot.TimelineEntry
	Actor    string
	From, To string
	Cursor   string
	Next     string
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

func (c *Console) savedSearch(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id, ok := pathID(r)
	if !ok {
		c.notFound(w, r)
		return
	}
	f := newFilters(r)
	actor, from, to, cursor := f.text("actor", maxFilterLen), f.time("from"), f.time("to"), f.cursor("cursor")
	occCursor := f.cursor("occ")
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	ss, err := c.d.SavedSearches.GetEntry(r.Context(), s.OrganizationID, id)
	if c.readFailed(w, r, err) {
		return
	}
	tl, next, err := c.d.Snapshots.Timeline(r.Context(), s.OrganizationID, id,
		snapshot.TimelineParams{Actor: actor, From: from, To: to, Limit: pageSize, Cursor: cursor})
	if c.readFailed(w, r, err) {
		return
	}
	rs, _, err := c.d.Runs.Search(r.Context(), s.OrganizationID, runs.SearchParams{SavedSearchID: id, Limit: 10})
	if c.readFailed(w, r, err) {
		return
	}
	p := savedSearchPage{
		Search: ss, Timeline: tl, Actor: actor, From: localInput(from), To: localInput(to),
		Cursor: cursor, Next: next, Runs: rs, OccCursor: occCursor,
	}
	if c.d.Schedules != nil {
		p.Schedules = true
		p.Schedule, err = c.d.Schedules.Get(r.Context(), s.OrganizationID, id)
		if errors.Is(err, schedule.ErrNotFound) {
			err = nil
		}
		if c.readFailed(w, r, err) {
			return
		}
		p.Occurrences, p.OccNext, err = c.d.Schedules.Occurrences(r.Context(), s.OrganizationID, id,
			schedule.ListParams{Limit: pageSize, Cursor: occCursor})
		if c.readFailed(w, r, err) {
			return
		}
	}
	c.render(w, r, http.StatusOK, "saved-search", ss.Name, p)
}

type comparePage struct {
	Search *savedsearch.Entry
	Diff   snapshotDiff
}

func (c *Console) compare(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id, ok := pathID(r)
	if !ok {
		c.notFound(w, r)
		return
	}
	f := newFilters(r)
	a, b := f.id("a"), f.id("b")
	if a == uuid.Nil || b == uuid.Nil {
		f.bad("a, b", "choose two snapshots to compare")
	}
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	ss, err := c.d.SavedSearches.GetEntry(r.Context(), s.OrganizationID, id)
	if c.readFailed(w, r, err) {
		return
	}
	sa, err := c.d.Snapshots.Get(r.Context(), s.OrganizationID, a)
	if c.readFailed(w, r, err) {
		return
	}
	sb, err := c.d.Snapshots.Get(r.Context(), s.OrganizationID, b)
	if c.readFailed(w, r, err) {
		return
	}
	if sa.SavedSearchID != id || sb.SavedSearchID != id {
		c.notFound(w, r)
		return
	}
	c.render(w, r, http.StatusOK, "compare", "Compare snapshots", comparePage{Search: ss, Diff: diffSnapshots(sa, sb)})
}

type snapshotPage struct {
	Snapshot *snapshot.Snapshot
	Runs     []runs.Run
	Cursor   string
	Next     string
}

func (c *Console) snapshot(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id, ok := pathID(r)
	if !ok {
		c.notFound(w, r)
		return
	}
	f := newFilters(r)
	cursor := f.cursor("cursor")
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	snap, err := c.d.Snapshots.Get(r.Context(), s.OrganizationID, id)
	if c.readFailed(w, r, err) {
		return
	}
	rs, next, err := c.d.Runs.Search(r.Context(), s.OrganizationID,
		runs.SearchParams{SnapshotID: id, SavedSearchID: snap.SavedSearchID, Limit: pageSize, Cursor: cursor})
	if c.readFailed(w, r, err) {
		return
	}
	c.render(w, r, http.StatusOK, "snapshot", "Snapshot v"+itoa(snap.SavedSearchVersion),
		snapshotPage{Snapshot: snap, Runs: rs, Cursor: cursor, Next: next})
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

func (c *Console) runs(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	f := newFilters(r)
	p := runsPage{
		Actor: f.text("actor", maxFilterLen), Key: f.text("key", maxFilterLen),
		Status: f.oneOf("status", runStatuses...), Cursor: f.cursor("cursor"), Statuses: runStatuses,
	}
	from, to, ssID := f.time("from"), f.time("to"), f.id("saved_search")
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	p.From, p.To = localInput(from), localInput(to)
	if ssID != uuid.Nil {
		p.SavedSearch = ssID.String()
	}
	rs, next, err := c.d.Runs.Search(r.Context(), s.OrganizationID, runs.SearchParams{
		SavedSearchID: ssID, Actor: p.Actor, Key: p.Key, Status: p.Status, From: from, To: to,
		Limit: pageSize, Cursor: p.Cursor,
	})
	if c.readFailed(w, r, err) {
		return
	}
	p.Runs, p.Next = rs, next
	c.render(w, r, http.StatusOK, "runs", "Runs", p)
}

type runPage struct {
	Run      *runs.Run
	Snapshot *snapshot.Snapshot
	Jobs     []providerjobs.Job
	Timeline *runTimeline
	// Key is the Idempotency-Key the Run was started with.
	Key string
}

func (c *Console) run(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id, ok := pathID(r)
	if !ok {
		c.notFound(w, r)
		return
	}
	run, err := c.d.Runs.Get(r.Context(), s.OrganizationID, id)
	if c.readFailed(w, r, err) {
		return
	}
	p := runPage{Run: run, Key: idempotencyKey(run.StartKey)}
	if run.SnapshotID != nil {
		snap, err := c.d.Snapshots.Get(r.Context(), s.OrganizationID, *run.SnapshotID)
		if err != nil && !errors.Is(err, snapshot.ErrNotFound) {
			c.internal(w, r, err)
			return
		}
		p.Snapshot = snap
	}
	jobs, _, err := c.d.JobAudit.Jobs(r.Context(), s.OrganizationID, providerjobs.JobListParams{RunID: id, Limit: 200})
	if c.readFailed(w, r, err) {
		return
	}
	p.Jobs = jobs
	p.Timeline, err = c.timeline(r.Context(), run, c.now())
	if c.readFailed(w, r, err) {
		return
	}
	c.render(w, r, http.StatusOK, "run", "Run "+id.String()[:8], p)
}

type jobsPage struct {
	Jobs             []providerjobs.Job
	Provider, Status string
	Run              string
	Cursor, Next     string
	Statuses         []string
}

var jobStatuses = []string{"pending", "running", "succeeded", "failed"}

func (c *Console) providerJobs(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	f := newFilters(r)
	p := jobsPage{Provider: f.text("provider", maxFilterLen), Status: f.oneOf("status", jobStatuses...),
		Cursor: f.cursor("cursor"), Statuses: jobStatuses}
	run := f.id("run")
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	if run != uuid.Nil {
		p.Run = run.String()
	}
	jobs, next, err := c.d.JobAudit.Jobs(r.Context(), s.OrganizationID, providerjobs.JobListParams{
		RunID: run, Provider: p.Provider, Status: providerjobs.Status(p.Status), Limit: pageSize, Cursor: p.Cursor})
	if c.readFailed(w, r, err) {
		return
	}
	p.Jobs, p.Next = jobs, next
	c.render(w, r, http.StatusOK, "provider-jobs", "Provider jobs", p)
}

type jobPage struct {
	Job          *providerjobs.Job
	Deliveries   []providerjobs.AppliedDelivery
	Drops        []providerjobs.Drop
	Cursor, Next string
}

func (c *Console) providerJob(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id, ok := pathID(r)
	if !ok {
		c.notFound(w, r)
		return
	}
	f := newFilters(r)
	cursor := f.cursor("cursor")
	if err := f.err(); err != nil {
		c.badFilters(w, r, err)
		return
	}
	job, err := c.d.ProviderJobs.Get(r.Context(), s.OrganizationID, id)
	if c.readFailed(w, r, err) {
		return
	}
	deliveries, err := c.d.JobAudit.Deliveries(r.Context(), job, 200)
	if c.readFailed(w, r, err) {
		return
	}
	drops, next, err := c.d.JobAudit.Drops(r.Context(), s.OrganizationID, id, pageSize, cursor)
	if c.readFailed(w, r, err) {
		return
	}
	c.render(w, r, http.StatusOK, "provider-job", "Provider job "+job.ProviderJobID,
		jobPage{Job: job, Deliveries: deliveries, Drops: drops, Cursor: cursor, Next: next})
}

// readFailed renders the page an error of a read deserves and reports
// whether there was one: not found for another organization's records, a
// 400 for a cursor the store did not write, else a logged 500.
func (c *Console) readFailed(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, savedsearch.ErrNotFound), errors.Is(err, snapshot.ErrNotFound),
		errors.Is(err, runs.ErrNotFound), errors.Is(err, providerjobs.ErrNotFound),
		errors.Is(err, schedule.ErrSavedSearchNotFound):
		c.notFound(w, r)
	case errors.Is(err, keyset.ErrInvalid): // every list's cursor, decoded in one place
		c.fail(w, r, http.StatusBadRequest, "Page not found", "That page link is not one of this console's. Start again from the first page.")
	case errors.Is(err, savedsearch.ErrInvalid):
		c.badFilters(w, r, err)
	case errors.As(err, new(*fairq.Refusal)):
		c.admissionFailed(w, r, err) // the claims' counts were refused a seat
	default:
		c.internal(w, r, err)
	}
	return true
}

// idempotencyKey returns the Idempotency-Key of a start key, less its
// namespace.
func idempotencyKey(startKey string) string {
	for _, p := range []string{"saved_search:", "direct:"} {
		if len(startKey) > len(p) && startKey[:len(p)] == p {
			return startKey[len(p):]
		}
	}
	return startKey
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
