package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/searchd/searchd/savedsearch"
)

func TestSavedSearchLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})

	// Create: 201, Location, version 1, the default baseline.
	res := b.do(req{method: http.MethodPost, path: "/v1/saved-searches", body: map[string]any{
		"name":  "Go jobs",
		"brief": map[string]any{"query": "golang", "filters": map[string]any{"remote": true, "salary": json.Number("12345678901234567890")}},
	}})
	if res.status != http.StatusCreated {
		t.Fatalf("create = %d %s, want 201", res.status, res.body)
	}
	var ss savedsearch.SavedSearch
	res.decode(t, &ss)
	if got, want := res.header.Get("Location"), "/v1/saved-searches/"+ss.ID.String(); got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	if ss.OrganizationID != b.org || ss.Name != "Go jobs" || ss.Version != 1 ||
		len(ss.Baseline.Items) != 0 || ss.Baseline.Cursor != nil {
		t.Errorf("created %+v, want org %s, version 1, empty baseline", ss, b.org)
	}
	// A large integer filter survives exactly: it is not rounded through float64.
	if got := ss.Brief.Filters["salary"]; got == nil || string(mustJSON(t, got)) != "12345678901234567890" {
		t.Errorf("filters.salary = %v, want 12345678901234567890 exactly", got)
	}
	path := "/v1/saved-searches/" + ss.ID.String()

	// Get.
	res = b.do(req{method: http.MethodGet, path: path})
	if res.status != http.StatusOK {
		t.Fatalf("get = %d %s", res.status, res.body)
	}

	// Patch the name, then the brief: one version each.
	res = b.do(req{method: http.MethodPatch, path: path, body: map[string]any{"name": "Go jobs, remote"}})
	res.decode(t, &ss)
	if res.status != http.StatusOK || ss.Name != "Go jobs, remote" || ss.Version != 2 || ss.Brief.Query != "golang" {
		t.Fatalf("patch name = %d %+v, want 200, new name, version 2, brief kept", res.status, ss)
	}
	res = b.do(req{method: http.MethodPatch, path: path, body: map[string]any{"brief": map[string]any{"query": "rust"}}})
	res.decode(t, &ss)
	if res.status != http.StatusOK || ss.Brief.Query != "rust" || ss.Brief.Filters != nil || ss.Version != 3 {
		t.Fatalf("patch brief = %d %+v, want the brief replaced whole, version 3", res.status, ss)
	}

	// Replace the baseline.
	res = b.do(req{method: http.MethodPut, path: path + "/baseline", body: map[string]any{
		"items": []string{"a", "b"}, "cursor": "page-2",
	}})
	res.decode(t, &ss)
	if res.status != http.StatusOK || len(ss.Baseline.Items) != 2 || ss.Baseline.Cursor == nil ||
		*ss.Baseline.Cursor != "page-2" || ss.Version != 4 {
		t.Fatalf("put baseline = %d %+v, want items a, b, cursor page-2, version 4", res.status, ss)
	}
	res = b.do(req{method: http.MethodPut, path: path + "/baseline", body: map[string]any{"items": []string{"c"}}})
	res.decode(t, &ss)
	if len(ss.Baseline.Items) != 1 || ss.Baseline.Cursor != nil || ss.Version != 5 {
		t.Fatalf("second put baseline = %+v, want exactly items [c] and no cursor: the whole baseline is set", ss)
	}

	// A start leaves a snapshot that must outlive the archive.
	start := b.start(ss.ID, "lifecycle-1", nil)
	if start.status != http.StatusCreated {
		t.Fatalf("start = %d %s", start.status, start.body)
	}

	// Archive: 204, then 404 on every read and start, and gone from lists;
	// its snapshots stay readable.
	res = b.do(req{method: http.MethodDelete, path: path})
	if res.status != http.StatusNoContent || len(res.body) != 0 {
		t.Fatalf("delete = %d %q, want 204 and no body", res.status, res.body)
	}
	for _, r := range []req{
		{method: http.MethodGet, path: path},
		{method: http.MethodPatch, path: path, body: map[string]any{"name": "x"}},
		{method: http.MethodPut, path: path + "/baseline", body: map[string]any{"items": []string{}}},
		{method: http.MethodDelete, path: path},
		{method: http.MethodPost, path: path + "/start", header: map[string]string{"Idempotency-Key": "after-archive"}},
	} {
		if res := b.do(r); res.status != http.StatusNotFound || res.problem(t).Code != "not_found" {
			t.Errorf("%s %s after archive = %d %s, want 404 not_found", r.method, r.path, res.status, res.body)
		}
	}
	var page struct{ Items []savedsearch.SavedSearch }
	b.do(req{method: http.MethodGet, path: "/v1/saved-searches"}).decode(t, &page)
	if len(page.Items) != 0 {
		t.Errorf("list after archive = %d items, want 0", len(page.Items))
	}
	var snaps struct{ Items []map[string]any }
	res = b.do(req{method: http.MethodGet, path: path + "/snapshots"})
	res.decode(t, &snaps)
	if res.status != http.StatusOK || len(snaps.Items) != 1 {
		t.Errorf("snapshots after archive = %d, %d items, want 200 and 1", res.status, len(snaps.Items))
	}
}

func TestCreateSavedSearchWithBaseline(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res := b.do(req{method: http.MethodPost, path: "/v1/saved-searches", body: `{
		"name": "with baseline",
		"brief": {"query": "q"},
		"baseline": {"items": ["x", "y"], "cursor": "c1"}
	}`})
	var ss savedsearch.SavedSearch
	res.decode(t, &ss)
	if res.status != http.StatusCreated || len(ss.Baseline.Items) != 2 || ss.Baseline.Cursor == nil || *ss.Baseline.Cursor != "c1" {
		t.Fatalf("create = %d %s, want 201 with the baseline", res.status, res.body)
	}
	// The merge-patch media type is JSON too (application/*+json).
	res = b.do(req{method: http.MethodPatch, path: "/v1/saved-searches/" + ss.ID.String(),
		body: `{"name":"renamed"}`, header: map[string]string{"Content-Type": "application/merge-patch+json"}})
	if res.status != http.StatusOK {
		t.Fatalf("patch with application/merge-patch+json = %d %s, want 200", res.status, res.body)
	}
}

func TestListSavedSearchesPagesNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var ids []string
	for range 5 {
		ids = append(ids, b.seedSavedSearch(seedOpts{}).ID.String())
	}
	b.seedSavedSearch(seedOpts{archived: true})

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more pages than 5 items in pages of 2 can fill")
		}
		q := url.Values{"limit": {"2"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []savedsearch.SavedSearch
			NextCursor *string `json:"next_cursor"`
		}
		res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches?" + q.Encode()})
		res.decode(t, &page)
		if res.status != http.StatusOK || len(page.Items) > 2 {
			t.Fatalf("page = %d %s", res.status, res.body)
		}
		for _, ss := range page.Items {
			got = append(got, ss.ID.String())
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if len(got) != len(ids) {
		t.Fatalf("listed %d saved searches, want %d (the archived one left out)", len(got), len(ids))
	}
	for i := range ids {
		if got[i] != ids[len(ids)-1-i] {
			t.Fatalf("listed %v, want newest first %v", got, ids)
		}
	}
}
