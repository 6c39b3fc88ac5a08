package api_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/runs"
)

// TestListRunsFilters: GET /v1/runs's filters, alone and combined, page
// (one Run a page, through the cursor) through exactly the caller's Runs
// they match, newest first, each once; another organization holding Runs
// under the same keys, statuses and instants sees none of them, nor they
// its.
func TestListRunsFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	other := uuid.New()
	otherToken := b.tokenFor(other, "other")
	ss := []uuid.UUID{b.seedSavedSearch(seedOpts{}).ID, b.seedSavedSearch(seedOpts{}).ID}
	otherSS := b.seedSavedSearch(seedOpts{org: other}).ID
	statuses := []string{runs.StatusQueued, runs.StatusRunning, runs.StatusSucceeded}
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	type run struct {
		id      uuid.UUID
		search  uuid.UUID
		key     string
		status  string
		created time.Time
	}
	var mine []run // newest first
	for i := range 6 {
		key, status, created := "key "+strconv.Itoa(i%3), statuses[i%3], base.Add(time.Duration(i)*time.Hour)
		var got startResult
		b.start(ss[i%2], key+"/"+strconv.Itoa(i/3), nil).decode(t, &got)
		// A key reads twice only across surfaces; the "/n" keeps the
		// saved-search keys apart, and the filter names the whole key.
		key += "/" + strconv.Itoa(i/3)
		var theirs startResult
		b.do(req{method: http.MethodPost, path: "/v1/saved-searches/" + otherSS.String() + "/start",
			token: otherToken, header: map[string]string{"Idempotency-Key": key}}).decode(t, &theirs)
		for _, id := range []uuid.UUID{got.Run.ID, theirs.Run.ID} {
			if _, err := b.pool.Exec(t.Context(), `UPDATE agent.runs SET status = $2, created_at = $3 WHERE id = $1`,
				id, status, created); err != nil {
				t.Fatal(err)
			}
		}
		mine = append([]run{{got.Run.ID, ss[i%2], key, status, created}}, mine...)
	}
	hour := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
	cases := []struct {
		query url.Values
		keep  func(r run) bool
	}{
		{url.Values{}, func(run) bool { return true }},
		{url.Values{"status": {"queued"}}, func(r run) bool { return r.status == "queued" }},
		{url.Values{"status": {"dispatched"}}, func(r run) bool { return false }},
		{url.Values{"idempotency_key": {"key 1/1"}}, func(r run) bool { return r.key == "key 1/1" }},
		{url.Values{"saved_search_id": {ss[0].String()}}, func(r run) bool { return r.search == ss[0] }},
		{url.Values{"created_after": {hour(1).Format(time.RFC3339)}}, func(r run) bool { return r.created.After(hour(1)) }},
		{url.Values{"created_before": {"2026-11-01T04:00:00+01:00"}}, func(r run) bool { return r.created.Before(hour(3)) }},
		{url.Values{"created_after": {hour(0).Format(time.RFC3339)}, "created_before": {hour(5).Format(time.RFC3339)}},
			func(r run) bool { return r.created.After(hour(0)) && r.created.Before(hour(5)) }},
		{url.Values{"status": {"succeeded"}, "saved_search_id": {ss[1].String()}},
			func(r run) bool { return r.status == "succeeded" && r.search == ss[1] }},
		{url.Values{"status": {"running"}, "created_after": {hour(0).Format(time.RFC3339)}},
			func(r run) bool { return r.status == "running" && r.created.After(hour(0)) }},
		{url.Values{"status": {"queued"}, "idempotency_key": {"key 0/1"}, "saved_search_id": {ss[1].String()},
			"created_after": {hour(2).Format(time.RFC3339)}, "created_before": {hour(4).Format(time.RFC3339Nano)}},
			func(r run) bool { return r.key == "key 0/1" }},
		{url.Values{"status": {"queued"}, "idempotency_key": {"key 0/1"}, "saved_search_id": {ss[0].String()}},
			func(r run) bool { return false }},
	}
	for _, c := range cases {
		var want []uuid.UUID
		for _, r := range mine {
			if c.keep(r) {
				want = append(want, r.id)
			}
		}
		q := c.query
		q.Set("limit", "1")
		var got []uuid.UUID
		for pages := 0; ; pages++ {
			if pages > len(mine) {
				t.Fatalf("GET /v1/runs?%s never ended", q.Encode())
			}
			var page struct {
				Items      []runs.ListItem
				NextCursor *string `json:"next_cursor"`
			}
			res := b.do(req{method: http.MethodGet, path: "/v1/runs?" + q.Encode()})
			if res.status != http.StatusOK {
				t.Fatalf("GET /v1/runs?%s = %d %s", q.Encode(), res.status, res.body)
			}
			res.decode(t, &page)
			for _, it := range page.Items {
				got = append(got, it.ID)
			}
			if page.NextCursor == nil {
				break
			}
			q.Set("cursor", *page.NextCursor)
		}
		q.Del("cursor")
		if !slices.Equal(got, want) {
			t.Errorf("GET /v1/runs?%s = %v, want %v", q.Encode(), got, want)
		}
		// The other organization, with the same filters (its own saved
		// search for ours), sees its Runs alone.
		var theirs struct{ Items []runs.ListItem }
		q.Del("limit")
		b.do(req{method: http.MethodGet, path: "/v1/runs?" + q.Encode(), token: otherToken}).decode(t, &theirs)
		for _, it := range theirs.Items {
			if it.OrganizationID != other || slices.Contains(want, it.ID) {
				t.Errorf("the other organization's GET /v1/runs?%s showed %s of %s", q.Encode(), it.ID, it.OrganizationID)
			}
		}
	}
}

// TestListRunsRefusesBadFilters: a bad filter is 400 validation_failed
// naming it, never a 500, and the list is not read.
func TestListRunsRefusesBadFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, c := range []struct{ query, field string }{
		{"status=done", "status"},
		{"status=QUEUED", "status"},
		{"idempotency_key=" + strings.Repeat("k", api.MaxIdempotencyKeyLen+1), "idempotency_key"},
		{"idempotency_key=%20k", "idempotency_key"},
		{"idempotency_key=k%0A", "idempotency_key"},
		{"idempotency_key=%22k%22", "idempotency_key"},
		{"created_after=yesterday", "created_after"},
		{"created_after=2026-12-01", "created_after"},
		{"created_after=0000-12-31T23:59:59Z", "created_after"},
		{"created_before=10000-01-01T00:00:00Z", "created_before"},
		{"created_before=9999-12-31T23:59:59-01:00", "created_before"},
		{"created_before=2026-12-01T00:00:00%2B25:00", "created_before"},
		{"created_after=2026-12-02T00:00:00Z&created_before=2026-12-01T00:00:00Z", "created_after"},
	} {
		res := b.do(req{method: http.MethodGet, path: "/v1/runs?" + c.query})
		res.wantProblem(t, http.StatusBadRequest, api.CodeValidationFailed, "GET /v1/runs?%s", c.query)
		if p := res.problem(t); len(p.Errors) != 1 || p.Errors[0].Field != c.field {
			t.Errorf("GET /v1/runs?%s refused %+v, want the field %s", c.query, p.Errors, c.field)
		}
	}
	// The edges of the range are accepted.
	res := b.do(req{method: http.MethodGet, path: "/v1/runs?created_after=0001-01-01T00:00:00Z&created_before=9999-12-31T23:59:59.999999Z"})
	if res.status != http.StatusOK {
		t.Errorf("the widest range = %d %s, want 200", res.status, res.body)
	}
}
