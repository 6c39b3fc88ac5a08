package api_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"
)

// nextCursor gets path with limit 1 and returns its one item's id and the
// page's next cursor; the test fails unless it is 200 with a next page.
func (b *bundle) nextCursor(t *testing.T, path string) (first, cursor string) {
	t.Helper()
	var page struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
		NextCursor *string `json:"next_cursor"`
	}
	res := b.do(req{method: http.MethodGet, path: path + "?limit=1"})
	res.decode(t, &page)
	if res.status != http.StatusOK || len(page.Items) != 1 || page.NextCursor == nil {
		t.Fatalf("GET %s?limit=1 = %d %s, want one item and a next page", path, res.status, res.body)
	}
	return page.Items[0].ID, *page.NextCursor
}

// TestListCursorsAreBoundToTheirListAndOrganization: a cursor the API
// minted pages on through the list that minted it (the second page holds
// the next item) and is refused, 400 validation_failed naming the cursor,
// everywhere else: by the same list read by another organization, by
// another list of the same organization, and by the same list of another
// saved search.
func TestListCursorsAreBoundToTheirListAndOrganization(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	s1, s2 := b.seedSavedSearch(seedOpts{}), b.seedSavedSearch(seedOpts{})
	for _, key := range []string{"cursor-one", "cursor-two"} {
		if res := b.start(s1.ID, key, map[string]any{}); res.status != http.StatusCreated {
			t.Fatalf("start %s = %d %s", key, res.status, res.body)
		}
	}
	if res := b.start(s2.ID, "cursor-three", map[string]any{}); res.status != http.StatusCreated {
		t.Fatalf("start = %d %s", res.status, res.body)
	}
	searches := "/v1/saved-searches"
	snapshots1 := "/v1/saved-searches/" + s1.ID.String() + "/snapshots"
	snapshots2 := "/v1/saved-searches/" + s2.ID.String() + "/snapshots"
	_, searchesCursor := b.nextCursor(t, searches)
	first, snapshotsCursor := b.nextCursor(t, snapshots1)
	_, runsCursor := b.nextCursor(t, "/v1/runs")

	// Genuine cursors page on: the second page is the other item.
	for _, c := range []struct{ path, cursor, notID string }{
		{searches, searchesCursor, ""},
		{snapshots1, snapshotsCursor, first},
		{"/v1/runs", runsCursor, ""},
	} {
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		res := b.do(req{method: http.MethodGet, path: c.path + "?" + url.Values{"limit": {"1"}, "cursor": {c.cursor}}.Encode()})
		res.decode(t, &page)
		if res.status != http.StatusOK || len(page.Items) != 1 || page.Items[0].ID == c.notID {
			t.Errorf("GET %s with its own next cursor = %d %s, want 200 with the next item", c.path, res.status, res.body)
		}
	}

	other := b.tokenFor(uuid.New(), "mallory")
	for _, c := range []struct {
		name, path, cursor, token string
	}{
		{"the saved searches' cursor of another organization", searches, searchesCursor, other},
		{"the runs' cursor of another organization", "/v1/runs", runsCursor, other},
		{"the saved searches' cursor on the runs", "/v1/runs", searchesCursor, ""},
		{"the runs' cursor on the saved searches", searches, runsCursor, ""},
		{"a snapshot list's cursor on the saved searches", searches, snapshotsCursor, ""},
		{"one saved search's snapshot cursor on another's", snapshots2, snapshotsCursor, ""},
		{"the snapshots' cursor on the occurrences", "/v1/saved-searches/" + s1.ID.String() + "/occurrences", snapshotsCursor, ""},
	} {
		res := b.do(req{method: http.MethodGet, path: c.path + "?cursor=" + url.QueryEscape(c.cursor), token: c.token})
		if res.status != http.StatusBadRequest {
			t.Errorf("%s: GET %s = %d %s, want 400", c.name, c.path, res.status, res.body)
			continue
		}
		if p := res.problem(t); p.Code != "validation_failed" || len(p.Errors) != 1 || p.Errors[0].Field != "cursor" {
			t.Errorf("%s: GET %s = %s, want validation_failed naming the cursor", c.name, c.path, res.body)
		}
	}
}
