package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/savedsearch"
)

// nested returns filters nesting depth levels, the filters object being 1.
func nested(depth int) map[string]any {
	m := map[string]any{"leaf": true}
	for range depth - 1 {
		m = map[string]any{"n": m}
	}
	return m
}

// manyKeys returns filters with n members at the top level.
func manyKeys(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = i
	}
	return m
}

// TestInputOverASizeLimitIsRefusedNamingTheLimit sends every request that
// breaks one of the size limits of a saved search or a direct start: each
// must answer 400 validation_failed with one field error on the field,
// naming the limit, and write nothing. The same request one step inside
// the limit is accepted, so each case fails on its limit alone.
func TestInputOverASizeLimitIsRefusedNamingTheLimit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	fp := fingerprintQuery(w.agentTables(t))
	ssPath := "/v1/saved-searches/" + w.ss.ID.String()
	create := func(brief, baseline map[string]any) map[string]any {
		return map[string]any{"name": "limits", "brief": brief, "baseline": baseline}
	}
	q := func(filters map[string]any) map[string]any { return map[string]any{"query": "q", "filters": filters} }
	cursor := func(n int) map[string]any { return map[string]any{"cursor": strings.Repeat("c", n)} }
	// 9000 items of 120 bytes: under the item count, over the byte size.
	big, fits := make([]string, 9000), make([]string, 8000)
	for i := range big {
		big[i] = strings.Repeat("i", 120)
	}
	for i := range fits {
		fits[i] = strings.Repeat("i", 120)
	}
	// Filters of one string over and under the byte limit.
	bytesOver := map[string]any{"s": strings.Repeat("x", savedsearch.MaxFilterBytes)}
	bytesUnder := map[string]any{"s": strings.Repeat("x", savedsearch.MaxFilterBytes-16)}
	input := func(n int) map[string]any {
		return map[string]any{"kind": "capability", "name": "c", "input": map[string]any{"s": strings.Repeat("x", n)}}
	}
	direct := map[string]string{"Idempotency-Key": "limits-direct"}

	tests := []struct {
		name         string
		method, path string
		header       map[string]string
		over, under  any
		field, limit string
	}{
		{"cursor on create", http.MethodPost, "/v1/saved-searches", nil,
			create(q(nil), cursor(savedsearch.MaxCursorBytes+1)), create(q(nil), cursor(savedsearch.MaxCursorBytes)),
			"baseline.cursor", "cursor limit"},
		{"cursor on replace", http.MethodPut, ssPath + "/baseline", nil,
			cursor(savedsearch.MaxCursorBytes + 1), cursor(savedsearch.MaxCursorBytes), "cursor", "cursor limit"},
		{"filter depth", http.MethodPost, "/v1/saved-searches", nil,
			create(q(nested(savedsearch.MaxFilterDepth+1)), nil), create(q(nested(savedsearch.MaxFilterDepth)), nil),
			"brief.filters", "filter depth limit"},
		{"filter depth on update", http.MethodPatch, ssPath, nil,
			map[string]any{"brief": q(nested(savedsearch.MaxFilterDepth + 1))}, map[string]any{"brief": q(nested(savedsearch.MaxFilterDepth))},
			"brief.filters", "filter depth limit"},
		{"filter keys", http.MethodPost, "/v1/saved-searches", nil,
			create(q(manyKeys(savedsearch.MaxFilterKeys+1)), nil), create(q(manyKeys(savedsearch.MaxFilterKeys)), nil),
			"brief.filters", "filter key limit"},
		{"filter bytes", http.MethodPost, "/v1/saved-searches", nil,
			create(q(bytesOver), nil), create(q(bytesUnder), nil), "brief.filters", "filter size limit"},
		{"baseline bytes", http.MethodPost, "/v1/saved-searches", nil,
			create(q(nil), map[string]any{"items": big}), create(q(nil), map[string]any{"items": fits}),
			"baseline.items", "baseline size limit"},
		{"baseline bytes on replace", http.MethodPut, ssPath + "/baseline", nil,
			map[string]any{"items": big}, map[string]any{"items": fits}, "items", "baseline size limit"},
		{"direct input", http.MethodPost, "/v1/runs", direct,
			input(api.MaxDirectInputBytes), input(api.MaxDirectInputBytes - 64), "input", "input size limit"},
	}
	for _, tt := range tests {
		before, err := w.fingerprint(fp)
		if err != nil {
			t.Fatal(err)
		}
		res := w.do(req{method: tt.method, path: tt.path, body: tt.over, header: tt.header})
		p := res.problem(t)
		switch {
		case res.status != http.StatusBadRequest || p.Code != api.CodeValidationFailed:
			t.Errorf("%s: %d %s, want 400 validation_failed", tt.name, res.status, res.body)
		case len(p.Errors) != 1 || p.Errors[0].Field != tt.field || !strings.Contains(p.Errors[0].Message, tt.limit):
			t.Errorf("%s: errors %+v, want one on %s naming the %s", tt.name, p.Errors, tt.field, tt.limit)
		}
		if after, err := w.fingerprint(fp); err != nil || after != before {
			t.Errorf("%s: the refused request wrote rows (%v)", tt.name, err)
		}
		if res := w.do(req{method: tt.method, path: tt.path, body: tt.under, header: tt.header}); res.status >= 300 {
			t.Errorf("%s: at the limit = %d %s, want success", tt.name, res.status, res.body)
		}
	}
}

// TestRowsOverTheNewLimitsStillReadAndStart writes a saved search the way
// a database from before the limits may hold one (a 64 KiB cursor, filters
// of 40 KiB, a 2 MiB baseline) and checks it still reads, lists, starts,
// and that its snapshot reads whole.
func TestRowsOverTheNewLimitsStillReadAndStart(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	ctx := context.Background()
	bigFilters := fmt.Sprintf(`{"query":"old","filters":{"s":%q}}`, strings.Repeat("f", 40<<10))
	if _, err := b.pool.Exec(ctx, `UPDATE agent.saved_searches SET brief = $2::jsonb WHERE id = $1`, ss.ID, bigFilters); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE agent.saved_search_baselines
		SET cursor = repeat('c', 65536), items = array_fill(repeat('i', 200), ARRAY[10000]) WHERE saved_search_id = $1`, ss.ID); err != nil {
		t.Fatal(err)
	}
	path := "/v1/saved-searches/" + ss.ID.String()
	if res := b.do(req{method: http.MethodGet, path: path}); res.status != http.StatusOK || len(res.body) < 2<<20 {
		t.Fatalf("GET of an oversized saved search = %d, %d bytes", res.status, len(res.body))
	}
	if res := b.do(req{method: http.MethodGet, path: "/v1/saved-searches"}); res.status != http.StatusOK ||
		!strings.Contains(string(res.body), `"baseline_items":10000`) {
		t.Fatalf("list with an oversized saved search = %d %.300s", res.status, res.body)
	}
	res := b.start(ss.ID, "old-row", nil)
	var started struct {
		Snapshot struct{ ID uuid.UUID } `json:"snapshot"`
	}
	res.decode(t, &started)
	if res.status != http.StatusCreated {
		t.Fatalf("start of an oversized saved search = %d %s", res.status, res.body)
	}
	if res := b.do(req{method: http.MethodGet, path: "/v1/snapshots/" + started.Snapshot.ID.String()}); res.status != http.StatusOK || len(res.body) < 2<<20 {
		t.Fatalf("GET of its snapshot = %d, %d bytes", res.status, len(res.body))
	}
	// A change that touches neither the brief nor the baseline still works.
	if res := b.do(req{method: http.MethodPatch, path: path, body: map[string]any{"name": "renamed"}}); res.status != http.StatusOK {
		t.Errorf("renaming an oversized saved search = %d %.300s", res.status, res.body)
	}
}

// TestListPagesStayUnderTheirDocumentedSize fills a full page of each list
// with the largest items its rows can make (every bounded field at its
// limit, in characters JSON escapes six bytes wide), and checks each page
// stays under the ceiling docs/api.md and the OpenAPI document state.
func TestListPagesStayUnderTheirDocumentedSize(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	store := savedsearch.NewStore(b.pool)
	wide := func(n int) string { return strings.Repeat("<", n) }
	var last *savedsearch.SavedSearch
	for range savedsearch.MaxListLimit {
		ss, err := store.Create(ctx, b.org, savedsearch.CreateParams{
			Name:     wide(savedsearch.MaxNameLen),
			Brief:    savedsearch.Brief{Query: wide(savedsearch.MaxQueryLen), Filters: map[string]any{"s": wide(2000)}},
			Baseline: savedsearch.Baseline{Items: []string{wide(200), wide(200)}, Cursor: ptr(wide(1000))},
		})
		if err != nil {
			t.Fatal(err)
		}
		last = ss
	}
	// An actor of 255 control characters, each escaped as \u00XX.
	b.token = b.tokenFor(b.org, strings.Repeat("\x01", 255))
	for i := range 200 {
		res := b.start(last.ID, fmt.Sprintf("page-%d", i), map[string]any{"note": wide(500), "max_results": 1000})
		if res.status != http.StatusCreated {
			t.Fatalf("start %d = %d %s", i, res.status, res.body)
		}
	}
	for _, tt := range []struct {
		path string
		max  int
	}{
		{"/v1/saved-searches?limit=200", api.MaxSavedSearchPageBytes},
		{"/v1/runs?limit=200", api.MaxRunPageBytes},
		{"/v1/saved-searches/" + last.ID.String() + "/snapshots?limit=200", api.MaxSnapshotPageBytes},
	} {
		res := b.do(req{method: http.MethodGet, path: tt.path})
		if res.status != http.StatusOK || strings.Count(string(res.body), `"id":`) < 200 {
			t.Fatalf("GET %s = %d, want a full page of 200", tt.path, res.status)
		}
		t.Logf("GET %s: %d bytes, ceiling %d (%.0f%%)", tt.path, len(res.body), tt.max, 100*float64(len(res.body))/float64(tt.max))
		if len(res.body) > tt.max {
			t.Errorf("GET %s answered %d bytes, over its documented ceiling of %d", tt.path, len(res.body), tt.max)
		}
	}
}

func ptr[T any](v T) *T { return &v }
