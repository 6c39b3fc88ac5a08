package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestStaticServesItsNamedFilesAndNothingElse: the assets are served by
// name; the directory, a name that is not there and a path below it are
// the console's 404, never a listing of the embedded files.
func TestStaticServesItsNamedFilesAndNothingElse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tt := range []struct {
		path, contentType string
	}{
		{"/console/static/console.css", "text/css; charset=utf-8"},
		{"/console/static/console.js", "text/javascript; charset=utf-8"},
	} {
		rec := b.do("GET", tt.path, "", nil, nil)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != tt.contentType || rec.Body.Len() == 0 {
			t.Errorf("GET %s = %d %q with %d bytes, want 200 %q and the file", tt.path, rec.Code,
				rec.Header().Get("Content-Type"), rec.Body.Len(), tt.contentType)
		}
		if etag := rec.Header().Get("ETag"); etag == "" {
			t.Errorf("GET %s has no ETag", tt.path)
		} else if again := b.do("GET", tt.path, "", nil, map[string]string{"If-None-Match": etag}); again.Code != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match its ETag = %d, want 304", tt.path, again.Code)
		}
	}
	for _, path := range []string{
		"/console/static/",
		"/console/static",
		"/console/static/missing.js",
		"/console/static/console.css/x",
		"/console/static/static/console.css",
	} {
		rec := b.do("GET", path, "", nil, nil)
		body := rec.Body.String()
		if rec.Code != http.StatusNotFound || strings.Contains(body, `href="console.css"`) || strings.Contains(body, "<pre>") {
			t.Errorf("GET %s = %d, want the console's 404 and no listing; body:\n%.300s", path, rec.Code, body)
		}
	}
}

// TestOutcomeMessagesComeFromFixedCodesOnly: the claims and uncertain
// pages show the outcome of a form from a code the console wrote (or, for
// a release, the release the database recorded), never text of the URL:
// a link crafted with any text prints nothing of it in the console's own
// alerts.
func TestOutcomeMessagesComeFromFixedCodesOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operatorSignIn(t)
	const spoof = "Your session expired: sign in again at evil.example"
	for _, target := range []string{
		"/console/operator/claims?refused=",
		"/console/operator/claims?released=",
		"/console/operator/uncertain?refused=",
		"/console/operator/uncertain?resolved=",
	} {
		rec := b.do("GET", target+url.QueryEscape(spoof), op, nil, nil)
		body := rec.Body.String()
		if rec.Code != http.StatusOK || strings.Contains(body, "evil.example") || strings.Contains(body, `class="alert`) {
			t.Errorf("GET %s<text> = %d; the page shows an alert or the text:\n%s", target, rec.Code, alertOf(body))
		}
	}
	// A release id that no release recorded shows nothing either.
	if body := b.do("GET", "/console/operator/claims?released="+b.world.Stuck.String(), op, nil, nil).Body.String(); strings.Contains(body, `class="alert`) {
		t.Errorf("a release that did not happen is announced:\n%s", alertOf(body))
	}
	// The codes the console writes show their fixed messages.
	for target, want := range map[string]string{
		"/console/operator/claims?refused=completed":        "Nothing was released: the claim is completed",
		"/console/operator/claims?refused=reason":           "Nothing was released: a reason is required",
		"/console/operator/uncertain?refused=not_uncertain": "Nothing was decided: the call is not uncertain",
		"/console/operator/uncertain?resolved=delivered":    "Recorded: the call was marked delivered",
		"/console/operator/uncertain?resolved=retry":        "Recorded: one retry with the same key is authorized",
	} {
		if body := b.do("GET", target, op, nil, nil).Body.String(); !strings.Contains(body, want) {
			t.Errorf("GET %s lacks %q:\n%s", target, want, alertOf(body))
		}
	}
	// A real release is announced from its record: who and why.
	form := b.stuckForm(t, op)
	rec := b.do("POST", "/console/operator/claims/"+b.world.Stuck.String()+"/release", op, form, nil)
	loc := rec.Header().Get("Location")
	if rec.Code != http.StatusSeeOther || !strings.Contains(loc, "released="+b.world.Stuck.String()) {
		t.Fatalf("POST release = %d to %q, want 303 to released=<the claim>", rec.Code, loc)
	}
	body := b.do("GET", loc, op, nil, nil).Body.String()
	if !strings.Contains(alertOf(body), "Released claim") || !strings.Contains(alertOf(body), "worker gone") || !strings.Contains(alertOf(body), "olga") {
		t.Errorf("after the release the page says:\n%s\nwant the release with its actor and reason", alertOf(body))
	}
}

// alertOf returns the alerts of a page, for a failure message.
func alertOf(body string) string {
	var out []string
	for _, part := range strings.Split(body, `<p class="alert`)[1:] {
		end := strings.Index(part, "</p>")
		if end < 0 {
			end = len(part)
		}
		out = append(out, `<p class="alert`+part[:end])
	}
	return strings.Join(out, "\n")
}

// TestCompareShowsNullForANullValue: a filter that goes from null to a
// value, and a baseline cursor from none to one, show null on the old
// side, not a blank; a filter added shows as absent there.
func TestCompareShowsNullForANullValue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	ctx := context.Background()
	older, newer := uuid.New(), uuid.New()
	if _, err := b.pool.Exec(ctx, `
		INSERT INTO agent.saved_search_snapshots (id, organization_id, saved_search_id, saved_search_version,
			saved_search_name, brief, baseline, content_hash, created_at)
		VALUES ($1, $3, $4, 7, 'n', '{"query":"q","filters":{"since":null}}', '{"items":["a"],"cursor":null}', repeat('7', 64), now() - interval '1 minute'),
			($2, $3, $4, 8, 'n', '{"query":"q","filters":{"since":"2026-01-01","new":1}}', '{"items":["a"],"cursor":"p2"}', repeat('8', 64), now())`,
		older, newer, w.OrgA, w.Search); err != nil {
		t.Fatal(err)
	}
	tok := b.signIn(t, w.OrgA, "alice")
	rec := b.do("GET", fmt.Sprintf("/console/saved-searches/%s/compare?a=%s&b=%s", w.Search, older, newer), tok, nil, nil)
	body := regexp.MustCompile(`>\s+<`).ReplaceAllString(rec.Body.String(), "><")
	for _, want := range []string{
		`<td class="mono">filters.since</td><td><span class="badge b-changed">changed</span></td><td class="old">null</td>`,
		`<td class="mono">baseline.cursor</td><td><span class="badge b-changed">changed</span></td><td class="old">null</td>`,
		`<td class="mono">filters.new</td><td><span class="badge b-added">added</span></td><td class="absent" title="not in this snapshot">absent</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("compare = %d lacks\n%s", rec.Code, want)
		}
	}
}

// TestTimeFiltersAreUTCTextFields: the time filters are text fields that
// show and take a UTC time as the console reads it (a browser's date
// picker would show it in the reader's locale and zone while the label
// says UTC), and a time written with a space is understood.
func TestTimeFiltersAreUTCTextFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.signIn(t, b.world.OrgA, "alice")
	for _, path := range []string{"/console/runs", "/console/saved-searches/" + b.world.Search.String()} {
		rec := b.do("GET", path+"?from=2026-12-01+09:30&to=2026-12-02T10:15", tok, nil, nil)
		body := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s with times = %d, want 200", path, rec.Code)
		}
		if strings.Contains(body, "datetime-local") {
			t.Errorf("GET %s renders a datetime-local field, which shows the browser's locale", path)
		}
		for _, want := range []string{
			`<input type="text" name="from" value="2026-12-01 09:30" placeholder="2026-12-01 09:30"`,
			`<input type="text" name="to" value="2026-12-02 10:15"`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s lacks %s", path, want)
			}
		}
	}
}
