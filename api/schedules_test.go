package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/schedule"
)

// scheduleBody is the answer of the schedule routes.
type scheduleBody struct {
	SavedSearchID   uuid.UUID `json:"saved_search_id"`
	IntervalSeconds *int64    `json:"interval_seconds"`
	Cron            *string   `json:"cron"`
	TimeZone        string    `json:"time_zone"`
	CatchUpSeconds  int64     `json:"catch_up_seconds"`
	Paused          bool      `json:"paused"`
	NextDueAt       *string   `json:"next_due_at"`
	Version         int64     `json:"version"`
	UpdatedBy       *string   `json:"updated_by"`
	MaxResults      int       `json:"max_results"`
	Note            string    `json:"note"`
}

// TestScheduleSetReadPauseRemove walks a schedule through its routes:
// created 201 with Location and ETag, the same set again changes nothing,
// a replace bumps the version, If-Match guards every change (and refuses
// to create), pause and resume are sets, remove is 204 and then 404.
func TestScheduleSetReadPauseRemove(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String() + "/schedule"
	daily := map[string]any{"cron": "0 9 * * 1-5", "time_zone": "Europe/Berlin"}

	if res := b.do(req{method: http.MethodGet, path: path}); res.status != http.StatusNotFound ||
		res.problem(t).Detail != "this saved search has no schedule" {
		t.Fatalf("GET with no schedule = %d %s, want 404 saying there is none", res.status, res.body)
	}
	res := b.do(req{method: http.MethodPut, path: path, body: daily, header: map[string]string{"If-Match": "*"}})
	if p := res.problem(t); res.status != http.StatusPreconditionFailed || p.CurrentVersion != nil {
		t.Fatalf("PUT If-Match: * with no schedule = %d %s, want 412 with no current version", res.status, res.body)
	}
	res = b.do(req{method: http.MethodPut, path: path, body: daily})
	var sc scheduleBody
	res.decode(t, &sc)
	if res.status != http.StatusCreated || res.header.Get("Location") != path || res.header.Get("ETag") != `"1"` ||
		sc.Version != 1 || sc.Cron == nil || *sc.Cron != "0 9 * * 1-5" || sc.CatchUpSeconds != 86400 ||
		sc.NextDueAt == nil || sc.UpdatedBy == nil || *sc.UpdatedBy != "tester" {
		t.Fatalf("PUT = %d %v %s, want 201 at version 1 by tester with its defaults", res.status, res.header, res.body)
	}
	if res = b.do(req{method: http.MethodPut, path: path, body: daily}); res.status != http.StatusOK || res.header.Get("ETag") != `"1"` {
		t.Errorf("the same PUT again = %d ETag %s, want 200 at version 1", res.status, res.header.Get("ETag"))
	}
	if res = b.do(req{method: http.MethodGet, path: path}); res.status != http.StatusOK || res.header.Get("ETag") != `"1"` {
		t.Errorf("GET = %d ETag %s", res.status, res.header.Get("ETag"))
	}
	hourly := map[string]any{"interval_seconds": 3600}
	res = b.do(req{method: http.MethodPut, path: path, body: hourly, header: map[string]string{"If-Match": `"7"`}})
	if p := res.problem(t); res.status != http.StatusPreconditionFailed || p.CurrentVersion == nil || *p.CurrentVersion != 1 ||
		res.header.Get("ETag") != `"1"` {
		t.Fatalf("PUT If-Match 7 = %d %s, want 412 naming version 1", res.status, res.body)
	}
	res = b.do(req{method: http.MethodPut, path: path, body: hourly, header: map[string]string{"If-Match": `"1"`}})
	sc = scheduleBody{}
	res.decode(t, &sc)
	if res.status != http.StatusOK || sc.Version != 2 || sc.IntervalSeconds == nil || sc.Cron != nil || sc.TimeZone != "UTC" {
		t.Fatalf("replace = %d %s, want version 2, hourly, UTC", res.status, res.body)
	}

	res = b.do(req{method: http.MethodPost, path: path + "/pause", header: map[string]string{"If-Match": `"1"`}})
	if res.status != http.StatusPreconditionFailed {
		t.Errorf("pause If-Match 1 on version 2 = %d, want 412", res.status)
	}
	for range 2 {
		res = b.do(req{method: http.MethodPost, path: path + "/pause"})
		sc = scheduleBody{}
		res.decode(t, &sc)
		if res.status != http.StatusOK || !sc.Paused || sc.NextDueAt != nil || sc.Version != 3 {
			t.Errorf("pause = %d %s, want paused at version 3, twice", res.status, res.body)
		}
	}
	res = b.do(req{method: http.MethodPost, path: path + "/resume", header: map[string]string{"If-Match": `"3"`}})
	sc = scheduleBody{}
	res.decode(t, &sc)
	if res.status != http.StatusOK || sc.Paused || sc.NextDueAt == nil || sc.Version != 4 {
		t.Errorf("resume = %d %s, want running at version 4", res.status, res.body)
	}
	if res = b.do(req{method: http.MethodDelete, path: path, header: map[string]string{"If-Match": `"3"`}}); res.status != http.StatusPreconditionFailed {
		t.Errorf("DELETE If-Match 3 on version 4 = %d, want 412", res.status)
	}
	if res = b.do(req{method: http.MethodDelete, path: path, header: map[string]string{"If-Match": `"4"`}}); res.status != http.StatusNoContent {
		t.Errorf("DELETE = %d %s, want 204", res.status, res.body)
	}
	for _, r := range []req{{method: http.MethodGet, path: path}, {method: http.MethodDelete, path: path},
		{method: http.MethodPost, path: path + "/pause"}, {method: http.MethodHead, path: path}} {
		if res = b.do(r); res.status != http.StatusNotFound {
			t.Errorf("%s %s after the remove = %d, want 404", r.method, r.path, res.status)
		}
	}
}

// TestScheduleSetIsIdempotentByKey: a keyed set runs once; a repeat is
// 200 Idempotent-Replayed with the schedule as it is now; the key with
// another body is 422 key_reused.
func TestScheduleSetIsIdempotentByKey(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String() + "/schedule"
	key := map[string]string{"Idempotency-Key": "set-1"}
	body := map[string]any{"interval_seconds": 600}
	if res := b.do(req{method: http.MethodPut, path: path, body: body, header: key}); res.status != http.StatusCreated {
		t.Fatalf("keyed PUT = %d %s, want 201", res.status, res.body)
	}
	b.do(req{method: http.MethodPost, path: path + "/pause"})
	res := b.do(req{method: http.MethodPut, path: path, body: body, header: key})
	var sc scheduleBody
	res.decode(t, &sc)
	if res.status != http.StatusOK || res.header.Get("Idempotent-Replayed") != "true" || !sc.Paused || sc.Version != 2 {
		t.Errorf("keyed PUT repeated = %d %v %s, want 200 replayed with the paused schedule", res.status, res.header, res.body)
	}
	res = b.do(req{method: http.MethodPut, path: path, body: map[string]any{"interval_seconds": 900}, header: key})
	res.wantProblem(t, http.StatusUnprocessableEntity, "key_reused", "the key with another body")
	b.wantCount(t, 1, `SELECT count(*) FROM agent.idempotency_keys WHERE scope = 'surface.schedule.set' AND status = 'completed'`)
}

// TestScheduleRefusals: bad input is a 400 naming each field, before any
// SQL; another organization's or an unknown saved search is 404.
func TestScheduleRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String() + "/schedule"
	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "interval_seconds"},
		{map[string]any{"interval_seconds": 59}, "interval_seconds"},
		{map[string]any{"interval_seconds": 60, "cron": "* * * * *"}, "cron"},
		{map[string]any{"cron": "61 * * * *"}, "cron"},
		{map[string]any{"cron": "0 9 30 2 *"}, "cron"},
		{map[string]any{"interval_seconds": 60, "time_zone": "Nowhere/Else"}, "time_zone"},
		{map[string]any{"interval_seconds": 60, "catch_up_seconds": 604801}, "catch_up_seconds"},
		{map[string]any{"interval_seconds": 60, "start_at": "tomorrow"}, "start_at"},
		{map[string]any{"interval_seconds": "60"}, "interval_seconds"},
		{map[string]any{"interval_seconds": 60, "every": "1h"}, "every"},
		// Issue 36: due after year 9999, stored, then 500 on every read.
		{map[string]any{"cron": "@yearly", "start_at": "9999-12-31T23:59:59Z"}, "start_at"},
		{map[string]any{"interval_seconds": 60, "start_at": "9999-12-31T23:59:59Z"}, "start_at"},
		{map[string]any{"interval_seconds": 31622400, "start_at": "9999-12-30T00:00:00Z"}, "start_at"},
		// The start options, with a start's limits (issue 37).
		{map[string]any{"interval_seconds": 60, "max_results": 0}, "max_results"},
		{map[string]any{"interval_seconds": 60, "max_results": 1001}, "max_results"},
		{map[string]any{"interval_seconds": 60, "note": strings.Repeat("n", 501)}, "note"},
	} {
		res := b.do(req{method: http.MethodPut, path: path, body: tc.body})
		p := res.problem(t)
		found := false
		for _, f := range p.Errors {
			found = found || f.Field == tc.field
		}
		if res.status != http.StatusBadRequest || p.Code != "validation_failed" || !found {
			t.Errorf("PUT %v = %d %s, want 400 naming %s", tc.body, res.status, res.body, tc.field)
		}
	}
	b.wantCount(t, 0, `SELECT count(*) FROM agent.saved_search_schedules`)
	other := b.seedSavedSearch(seedOpts{org: uuid.New()})
	archived := b.seedSavedSearch(seedOpts{archived: true})
	for _, id := range []string{other.ID.String(), uuid.NewString(), "not-a-uuid", archived.ID.String()} {
		res := b.do(req{method: http.MethodPut, path: "/v1/saved-searches/" + id + "/schedule", body: map[string]any{"interval_seconds": 60}})
		if res.status != http.StatusNotFound {
			t.Errorf("PUT on saved search %s = %d %s, want 404", id, res.status, res.body)
		}
	}
	if res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches/" + other.ID.String() + "/occurrences"}); res.status != http.StatusNotFound {
		t.Errorf("another organization's occurrences = %d, want 404", res.status)
	}
}

// TestOccurrencesAreListed: the occurrences a drain started are listed
// latest first, with their Run, a page at a time.
func TestOccurrencesAreListed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	b.do(req{method: http.MethodPut, path: "/v1/saved-searches/" + ss.ID.String() + "/schedule",
		body: map[string]any{"interval_seconds": 60, "start_at": "2020-01-01T00:00:00Z"}})
	// The first occurrence is the first due at or after the set: at most
	// a minute from now. Plant two earlier ones the way the drain would
	// have, then drain the one due.
	st := newStores(b.pool, nil)
	d, err := schedule.NewDrain(schedule.DrainDeps{Pool: b.pool, Start: st.starter(t, admission.Config{}).StartSavedSearch, Runs: st.runs},
		schedule.DrainConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(context.Background(), `UPDATE agent.saved_search_schedules SET next_due_at = now() - interval '2 minutes'
		WHERE saved_search_id = $1`, ss.ID); err != nil {
		t.Fatal(err)
	}
	if rep, err := d.Tick(context.Background()); err != nil || rep.Started < 2 {
		t.Fatalf("Tick = %+v, %v; want two or three occurrences started", rep, err)
	}
	path := "/v1/saved-searches/" + ss.ID.String() + "/occurrences"
	var page struct {
		Items      []schedule.Occurrence `json:"items"`
		NextCursor *string               `json:"next_cursor"`
	}
	res := b.do(req{method: http.MethodGet, path: path + "?limit=1"})
	res.decode(t, &page)
	if res.status != http.StatusOK || len(page.Items) != 1 || page.NextCursor == nil || page.Items[0].Status != schedule.StatusStarted ||
		page.Items[0].RunID == nil {
		t.Fatalf("first page = %d %s, want one started occurrence and a cursor", res.status, res.body)
	}
	first := page.Items[0].DueAt
	page.Items = nil
	res = b.do(req{method: http.MethodGet, path: path + "?limit=1&cursor=" + *page.NextCursor})
	res.decode(t, &page)
	if len(page.Items) != 1 || !page.Items[0].DueAt.Before(first) {
		t.Errorf("second page = %s, want an earlier occurrence", res.body)
	}
	if res := b.do(req{method: http.MethodGet, path: "/v1/runs/" + page.Items[0].RunID.String()}); res.status != http.StatusOK {
		t.Errorf("the occurrence's Run = %d", res.status)
	}
	if res := b.do(req{method: http.MethodGet, path: path + "?cursor=nope"}); res.status != http.StatusBadRequest {
		t.Errorf("a foreign cursor = %d, want 400", res.status)
	}
	if res := b.do(req{method: http.MethodHead, path: path}); res.status != http.StatusOK {
		t.Errorf("HEAD = %d, want 200", res.status)
	}
}

// TestScheduleAtTheLastDueTimeIsRead: a schedule set to come due at the
// last time searchd stores (schedule.LastDue, in year 9999) is answered
// and read back, by every route that renders it.
func TestScheduleAtTheLastDueTimeIsRead(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String() + "/schedule"
	last := schedule.LastDue.Format(time.RFC3339)
	res := b.do(req{method: http.MethodPut, path: path, body: map[string]any{
		"interval_seconds": int64(schedule.MaxInterval / time.Second), "start_at": last, "catch_up_seconds": int64(schedule.MaxCatchUp / time.Second)}})
	var sc scheduleBody
	res.decode(t, &sc)
	if res.status != http.StatusCreated || sc.NextDueAt == nil || *sc.NextDueAt != last {
		t.Fatalf("PUT at the last due time = %d %s, want 201 due at %s", res.status, res.body, last)
	}
	for _, route := range []req{
		{method: http.MethodGet, path: path},
		{method: http.MethodPost, path: path + "/pause"},
		{method: http.MethodPost, path: path + "/resume"},
		{method: http.MethodGet, path: "/v1/saved-searches/" + ss.ID.String() + "/occurrences"},
	} {
		if res := b.do(route); res.status != http.StatusOK {
			t.Errorf("%s %s = %d %s, want 200", route.method, route.path, res.status, res.body)
		}
	}
}

// TestRoutesWithoutABodyRefuseOne: pause, resume and the removals take no
// body; one sent (any length, any type: issue 36 sent 5 MB) is refused 413
// before it is read, and nothing changes.
func TestRoutesWithoutABodyRefuseOne(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String()
	if res := b.do(req{method: http.MethodPut, path: path + "/schedule", body: map[string]any{"interval_seconds": 3600}}); res.status != http.StatusCreated {
		t.Fatalf("PUT schedule = %d %s", res.status, res.body)
	}
	for _, r := range []req{
		{method: http.MethodPost, path: path + "/schedule/pause", body: strings.Repeat("x", 1<<20), header: map[string]string{"Content-Type": "text/plain"}},
		{method: http.MethodPost, path: path + "/schedule/resume", body: "{}"},
		{method: http.MethodDelete, path: path + "/schedule", body: "{}"},
		{method: http.MethodDelete, path: path, body: "{}"},
	} {
		res := b.do(r)
		if p := res.problem(t); res.status != http.StatusRequestEntityTooLarge || p.Code != "payload_too_large" {
			t.Errorf("%s %s with a body = %d %s, want 413 payload_too_large", r.method, r.path, res.status, res.body)
		}
	}
	var sc scheduleBody
	res := b.do(req{method: http.MethodGet, path: path + "/schedule"})
	if res.decode(t, &sc); res.status != http.StatusOK || sc.Paused || sc.Version != 1 {
		t.Errorf("after the refusals: %d %s, want the schedule unchanged", res.status, res.body)
	}
	if res := b.do(req{method: http.MethodPost, path: path + "/schedule/pause"}); res.status != http.StatusOK {
		t.Errorf("pause without a body = %d %s, want 200", res.status, res.body)
	}
}

// TestScheduleLimitIs409: a schedule beyond the organization's limit is
// refused 409 schedule_limit, and nothing is written.
func TestScheduleLimitIs409(t *testing.T) {
	t.Parallel()
	var store *schedule.Store
	b := setup(t, setupOpts{deps: func(d *api.Deps) {
		store = d.Schedules.(*schedule.Store).Limit(1)
		d.Schedules = store
	}})
	first, second := b.seedSavedSearch(seedOpts{}), b.seedSavedSearch(seedOpts{})
	hourly := map[string]any{"interval_seconds": 3600}
	if res := b.do(req{method: http.MethodPut, path: "/v1/saved-searches/" + first.ID.String() + "/schedule", body: hourly}); res.status != http.StatusCreated {
		t.Fatalf("the first schedule = %d %s", res.status, res.body)
	}
	res := b.do(req{method: http.MethodPut, path: "/v1/saved-searches/" + second.ID.String() + "/schedule", body: hourly})
	if p := res.problem(t); res.status != http.StatusConflict || p.Code != "schedule_limit" {
		t.Errorf("a schedule beyond the limit = %d %s, want 409 schedule_limit", res.status, res.body)
	}
	b.wantCount(t, 1, `SELECT count(*) FROM agent.saved_search_schedules`)
}

// TestScheduleCarriesStartOptions: a schedule's max_results and note are
// set, read back, defaulted (100 and none) when omitted, and a set of the
// same values again changes nothing.
func TestScheduleCarriesStartOptions(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String() + "/schedule"
	var sc scheduleBody
	res := b.do(req{method: http.MethodPut, path: path, body: map[string]any{"interval_seconds": 3600, "max_results": 7, "note": "digest"}})
	if res.decode(t, &sc); res.status != http.StatusCreated || sc.MaxResults != 7 || sc.Note != "digest" {
		t.Fatalf("PUT with options = %d %s, want 201 with max_results 7 and the note", res.status, res.body)
	}
	res = b.do(req{method: http.MethodPut, path: path, body: map[string]any{"interval_seconds": 3600, "max_results": 7, "note": "digest"}})
	if res.decode(t, &sc); res.status != http.StatusOK || sc.Version != 1 {
		t.Errorf("the same set again = %d %s, want 200 at version 1", res.status, res.body)
	}
	res = b.do(req{method: http.MethodPut, path: path, body: map[string]any{"interval_seconds": 3600}})
	if res.decode(t, &sc); res.status != http.StatusOK || sc.MaxResults != 100 || sc.Note != "" || sc.Version != 2 {
		t.Errorf("a set without options = %d %s, want the defaults (100, none) at version 2", res.status, res.body)
	}
}
