package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/console/consoletest"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/schedule"
)

// operatorOf signs in as an operator of org named sub and returns the
// session cookie.
func (b *bundle) operatorOf(t *testing.T, org uuid.UUID, sub string) string {
	t.Helper()
	tok, err := auth.SignOperatorToken(secret, org, sub, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return b.signInWith(t, tok)
}

// dispatchOf reads the state and retries of a Run's dispatch and the
// retries recorded of it, as "actor|reason" lines.
func (b *bundle) dispatchOf(t *testing.T, run uuid.UUID) (state string, retries int, recorded []string) {
	t.Helper()
	ctx := context.Background()
	if err := b.pool.QueryRow(ctx, `SELECT state, retries FROM agent.run_dispatches WHERE run_id = $1`, run).Scan(&state, &retries); err != nil {
		t.Fatal(err)
	}
	rows, err := b.pool.Query(ctx, `SELECT actor || '|' || reason FROM agent.run_dispatch_retries WHERE run_id = $1 ORDER BY retried_at`, run)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		recorded = append(recorded, s)
	}
	return state, retries, recorded
}

// TestAnOperatorRetriesAFailedDispatchFromTheRunPage is issue 37.7: the
// Run page of a dispatch the runtime refused carries a retry form for an
// operator of the organization, and none for its members; a retry needs
// the operator role (403), the session's CSRF token (403) and a reason of
// one line of 1 to 500 characters (400, the page saying why), is refused
// for a dispatch that is not failed (409, nothing written) and for
// another organization's Run (404), and once made is recorded with who
// and why and shown on the page.
func TestAnOperatorRetriesAFailedDispatchFromTheRunPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	page := "/console/runs/" + w.DirectRun.String()
	action := page + "/dispatch/retry"
	op, alice := b.operatorOf(t, w.OrgA, "olga"), b.signIn(t, w.OrgA, "alice")

	body := b.do("GET", page, alice, nil, nil).Body.String()
	if strings.Contains(body, `action="`+action+`"`) || !strings.Contains(body, "An operator retries it once the cause is fixed") {
		t.Errorf("a member's Run page offers the retry form, or does not say who retries")
	}
	csrf := b.csrfOf(t, op, page)
	if body := b.do("GET", page, op, nil, nil).Body.String(); !strings.Contains(body, `action="`+action+`"`) {
		t.Fatalf("the operator's Run page of a failed dispatch has no retry form")
	}

	post := func(cookie string, form url.Values) (int, string) {
		rec := b.do("POST", action, cookie, form, nil)
		return rec.Code, rec.Body.String()
	}
	aliceCSRF := b.csrfOf(t, alice, page)
	if code, _ := post(alice, url.Values{"csrf": {aliceCSRF}, "reason": {"I fixed it"}}); code != http.StatusForbidden {
		t.Errorf("a member's retry = %d, want 403", code)
	}
	if code, _ := post(op, url.Values{"reason": {"no csrf"}}); code != http.StatusForbidden {
		t.Errorf("a retry without the CSRF token = %d, want 403", code)
	}
	for _, c := range []struct {
		name, reason, want string
	}{
		{"no reason", "", "A reason is required"},
		{"a blank reason", "   ", "A reason is required"},
		{"a reason of 501 characters", strings.Repeat("é", 501), "at most 500 characters"},
		{"a reason of two lines", "first\nsecond", "one line"},
	} {
		code, body := post(op, url.Values{"csrf": {csrf}, "reason": {c.reason}})
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) || !strings.Contains(body, `id="retry-refused"`) {
			t.Errorf("%s: POST = %d, want 400 with the Run page saying %q", c.name, code, c.want)
		}
	}
	if state, n, rec := b.dispatchOf(t, w.DirectRun); state != "failed" || n != 0 || len(rec) != 0 {
		t.Fatalf("after refused retries the dispatch is %s with %d retries %v; want failed, none", state, n, rec)
	}
	// Another organization's operator: not found, nothing written.
	opB := b.operatorOf(t, w.OrgB, "mallory")
	if code, _ := post(opB, url.Values{"csrf": {b.csrfOf(t, opB, "/console/runs")}, "reason": {"not mine"}}); code != http.StatusNotFound {
		t.Errorf("org B's operator retrying org A's Run = %d, want 404", code)
	}

	// A link that says a retry was made announces none that was not.
	if body := b.do("GET", page+"?dispatch=retried", alice, nil, nil).Body.String(); strings.Contains(body, `class="alert`) {
		t.Errorf("a Run never retried announces a retry")
	}
	reason := "the runtime was deployed with enrich.company"
	rec := b.do("POST", action, op, url.Values{"csrf": {csrf}, "reason": {"  " + reason + " "}}, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != page+"?dispatch=retried" {
		t.Fatalf("retry = %d to %q, want 303 to the Run page", rec.Code, rec.Header().Get("Location"))
	}
	if state, n, got := b.dispatchOf(t, w.DirectRun); state != "pending" || n != 1 || len(got) != 1 || got[0] != "olga|"+reason {
		t.Errorf("after the retry the dispatch is %s with %d retries %v; want pending, one by olga with the reason", state, n, got)
	}
	if !strings.Contains(b.log.String(), "dispatch retried by an operator in the console") {
		t.Errorf("the retry was not logged")
	}
	body = b.do("GET", page+"?dispatch=retried", alice, nil, nil).Body.String()
	retries := body[strings.Index(body, "<h3>Operator retries</h3>"):]
	for _, want := range []string{"<strong>Retried</strong> by olga", "The dispatch is pending now", reason, "HTTP 422", "unknown capability enrich.company"} {
		if !strings.Contains(retries, want) && !strings.Contains(body, want) {
			t.Errorf("the Run page after the retry lacks %q", want)
		}
	}
	if !strings.Contains(retries, "olga") || !strings.Contains(retries, reason) {
		t.Errorf("the page's retries table lacks who and why")
	}

	// Not failed any more: refused, nothing written; a delivered one too.
	for _, run := range []uuid.UUID{w.DirectRun, w.SecondRun} {
		code, body := post(op, url.Values{"csrf": {csrf}, "reason": {"again"}})
		if run == w.SecondRun {
			rec := b.do("POST", "/console/runs/"+run.String()+"/dispatch/retry", op, url.Values{"csrf": {csrf}, "reason": {"again"}}, nil)
			code, body = rec.Code, rec.Body.String()
		}
		if code != http.StatusConflict || !strings.Contains(body, "Only a failed dispatch is retried") {
			t.Errorf("retry of Run %s, not failed = %d, want 409 saying why", run, code)
		}
	}
	if _, n, got := b.dispatchOf(t, w.DirectRun); n != 1 || len(got) != 1 {
		t.Errorf("a refused retry wrote: %d retries %v", n, got)
	}
}

// TestTheSchedulesOverviewListsTheOrganizationsSchedules: the overview
// names each scheduled saved search with its cadence, next due time and
// latest outcome, pages with a cursor of its own, and shows another
// organization none of it.
func TestTheSchedulesOverviewListsTheOrganizationsSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	tok := b.signIn(t, w.OrgA, "alice")
	rec := b.do("GET", "/console/schedules", tok, nil, nil)
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /console/schedules = %d", rec.Code)
	}
	for _, want := range []string{
		`href="/console/saved-searches/` + w.Scheduled.String() + `#schedule"`, "Nightly Go roles",
		"cron <code>0 9 * * *</code>", "in Europe/Berlin", `<span class="badge b-live">live</span>`,
		`<span class="badge b-succeeded">started</span>`, `href="/console/runs/`, `href="/console/schedules" class="current"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the schedules overview lacks %q", want)
		}
	}
	if n := strings.Count(body, `class="schedule-row"`); n != 1 {
		t.Errorf("%d schedules listed, want the one of org A", n)
	}
	// A page more than the console's 50: the seeded schedule, the oldest,
	// is on the second.
	ctx := context.Background()
	searches, schedules := savedsearch.NewStore(b.pool), schedule.NewStore(b.pool, nil)
	for i := range 50 {
		ss, err := searches.Create(ctx, w.OrgA, savedsearch.CreateParams{Name: fmt.Sprintf("hourly %02d", i),
			Brief: savedsearch.Brief{Query: "q"}, Actor: "bob"})
		if err != nil {
			t.Fatal(err)
		}
		iv := int64(3600)
		if _, _, err := schedules.Set(ctx, w.OrgA, ss.ID, schedule.SetParams{IntervalSeconds: &iv, Actor: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	body = b.do("GET", "/console/schedules", tok, nil, nil).Body.String()
	m := regexp.MustCompile(`href="/console/schedules\?cursor=([A-Za-z0-9_-]+)" class="next"`).FindStringSubmatch(body)
	if n := strings.Count(body, `class="schedule-row"`); n != 50 || m == nil || strings.Contains(body, consoletest.ScheduledName) ||
		!strings.Contains(body, "every 1 h") {
		t.Fatalf("the first page lists %d schedules (next page: %v), want 50 of the newest and a next page", n, m != nil)
	}
	body = b.do("GET", "/console/schedules?cursor="+m[1], tok, nil, nil).Body.String()
	if n := strings.Count(body, `class="schedule-row"`); n != 1 || !strings.Contains(body, consoletest.ScheduledName) {
		t.Errorf("the second page lists %d schedules, want the seeded one alone", n)
	}
	if rec := b.do("GET", "/console/schedules?cursor=nope", tok, nil, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("a foreign cursor = %d, want 400", rec.Code)
	}
	body = b.do("GET", "/console/schedules", b.signIn(t, w.OrgB, "eve"), nil, nil).Body.String()
	if strings.Contains(body, consoletest.ScheduledName) || !strings.Contains(body, "No saved search of your organization has a schedule") {
		t.Errorf("org B's overview shows org A's schedule, or does not say it has none")
	}
}

// onePlural finds a count of one with a plural noun ("1 items"): the
// nouns the console counts.
var onePlural = regexp.MustCompile(`(^|[^\d.,-])1 (items|attempts|operator retries|bytes|claims|drops|force-releases|requests|more flows|` +
	`duplicates|hash mismatches|path mismatches|passes|Runs|seconds|deliveries|schedules|snapshots)\b`)

// TestPagesSayOneItemNotOneItems: no page of the seeded world, whose
// refused Run has one delivery attempt and one operator retry and whose
// inbox has one duplicate and one hash mismatch, writes a count of one
// with a plural noun (issue 37.7).
func TestPagesSayOneItemNotOneItems(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	op := b.operatorOf(t, w.OrgA, "olga")
	page := "/console/runs/" + w.DirectRun.String()
	if rec := b.do("POST", page+"/dispatch/retry", op, url.Values{"csrf": {b.csrfOf(t, op, page)}, "reason": {"fixed"}}, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("retry = %d", rec.Code)
	}
	text := regexp.MustCompile(`<[^>]*>`)
	for _, target := range []string{
		page, "/console/runs/" + w.SecondRun.String(), "/console/runs", "/console/saved-searches",
		"/console/saved-searches/" + w.Search.String(), "/console/saved-searches/" + w.Scheduled.String(),
		"/console/snapshots/" + w.SecondSnapshot.String(), "/console/schedules", "/console/provider-jobs",
		"/console/provider-jobs/" + w.Job.String(), "/console/operator/claims", "/console/operator/inbound",
		"/console/operator/uncertain", "/console/operator/releases", "/console/operator/sweeper",
	} {
		rec := b.do("GET", target, op, nil, nil)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s = %d", target, rec.Code)
			continue
		}
		body := strings.Join(strings.Fields(text.ReplaceAllString(rec.Body.String(), " ")), " ")
		if m := onePlural.FindString(body); m != "" {
			t.Errorf("GET %s writes %q", target, strings.TrimSpace(m))
		}
		if target == page && !strings.Contains(body, "1 attempt, 1 operator retry") {
			t.Errorf("the retried Run's page does not count 1 attempt, 1 operator retry")
		}
	}
}
