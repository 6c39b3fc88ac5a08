package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/console/consoletest"
)

// TestEveryPageIsBoundedInBytes opens the console's heaviest pages on the
// records of consoletest.SeedLarge (a saved search at the documented
// limits, two of its snapshots with disjoint baselines, and a snapshot, a
// Run and a provider job written before the limits existed) and holds
// each to console.MaxPageBytes, while the pages still show what they
// must: the counts of the whole baseline, the first page of items, and
// the way to the next.
func TestEveryPageIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l, err := consoletest.SeedLarge(context.Background(), b.pool, b.world.OrgA)
	if err != nil {
		t.Fatal(err)
	}
	tok := b.signIn(t, b.world.OrgA, "alice")
	compare := fmt.Sprintf("/console/saved-searches/%s/compare?a=%s&b=%s", l.Search, l.Newer, l.Older)
	for _, tt := range []struct {
		path string
		want []string
	}{
		{"/console/saved-searches", []string{`<td class="num">10000</td>`}},
		{"/console/saved-searches/" + l.Search.String(), []string{"10000 items", "items 1–200 of 10000", "000001-&lt;&amp;&#34;", "items=200"}},
		{compare, []string{"10000 added · 10000 removed · 0 kept", "v2-000001-", "v1-000001-", "added=", "removed="}},
		{compare + "&added=9900&removed=200", []string{"v2-009901-", "v2-010000-", "v1-000201-", "items 9901–10000 of 10000", "items 201–400 of 10000"}},
		{"/console/snapshots/" + l.Newer.String(), []string{"10000 items", "v2-000001-", "items=200"}},
		{"/console/snapshots/" + l.Unbounded.String(), []string{"over the size limits", "2000 items", "…</li>"}},
		{"/console/runs", []string{"large"}},
		{"/console/runs/" + l.Run.String(), []string{"over the size limit", "GET /v1/runs/" + l.Run.String()}},
		{"/console/provider-jobs", []string{"large-"}},
		{"/console/provider-jobs/" + l.Job.String(), []string{"larger than the console shows", "GET /v1/provider-jobs/" + l.Job.String()}},
	} {
		rec := b.do("GET", tt.path, tok, nil, nil)
		body := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", tt.path, rec.Code)
			continue
		}
		t.Logf("GET %s: %d bytes", tt.path, len(body))
		if len(body) > console.MaxPageBytes {
			t.Errorf("GET %s is %d bytes, over console.MaxPageBytes (%d)", tt.path, len(body), console.MaxPageBytes)
		}
		for _, w := range tt.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q", tt.path, w)
			}
		}
	}
}
