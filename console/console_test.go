package console_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/console/consoletest"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/oidctest"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/sessions"
	"github.com/searchd/searchd/snapshot"
	"github.com/searchd/searchd/sweeper"
	"github.com/searchd/searchd/tools"
	"github.com/searchd/searchd/webhooks"
)

func TestMain(m *testing.M) {
	pgtest.AtExit(oidctest.Cleanup)
	pgtest.MainNoLeaks(m)
}

var secret = []byte("console-test-secret-0123456789abcdef")

type bundle struct {
	pool    *pgxpool.Pool
	world   *consoletest.World
	handler http.Handler
	log     *bytes.Buffer
}

// newConsoleAt is newConsole with the console's clock (nil: time.Now) and
// changes to its Deps. Its pages wait for the claim counts however long
// their read takes (OverviewWait -1), as the tests read them; the wait is
// tested on its own.
func newConsoleAt(t testing.TB, pool *pgxpool.Pool, log io.Writer, overviewTTL time.Duration, now func() time.Time, change ...func(*console.Deps)) http.Handler {
	t.Helper()
	d := console.Deps{
		SavedSearches: savedsearch.NewStore(pool),
		Snapshots:     snapshot.NewStore(pool),
		Runs:          runs.NewStore(pool, runs.Config{}),
		JobAudit:      providerjobs.NewAudit(pool),
		Operator:      operator.NewStore(pool, nil),
		SweeperRuns:   sweeper.NewRunLog(pool, sweeper.ViaServe, nil, nil),
		Dispatches:    dispatch.NewStore(pool, nil),
		Schedules:     schedule.NewStore(pool, nil),
		Webhooks:      webhooks.NewStore(pool, webhooks.Config{AllowHTTPLoopback: true}),
		Uncertain:     tools.NewInspector(pool, nil),
		Resolver:      tools.NewResolver(pool, tools.ResolverConfig{}),
		Sessions:      sessions.NewStore(pool, nil),
		TokenSignIn:   true,
		Verifier:      verifier(t),
		Logger:        slog.New(slog.NewJSONHandler(log, nil)),
		OverviewTTL:   overviewTTL,
		OverviewWait:  -1,
		Now:           now,
		Seats:         admissionFor(t, pool),
	}
	for _, f := range change {
		f(&d)
	}
	c, err := console.New(d)
	if err != nil {
		t.Fatal(err)
	}
	return c.Mount(http.NotFoundHandler())
}

// admissionFor returns an seat queue at its defaults, its seats as
// many as pool has connections, as cmd/searchd builds it.
func admissionFor(t testing.TB, pool *pgxpool.Pool) *seatq.Queue {
	t.Helper()
	q, err := seatq.New(seatq.Config{Seats: int(pool.Config().MaxConns)})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// seeded returns an isolated database holding the consoletest world.
func seeded(t testing.TB) (*pgxpool.Pool, *consoletest.World) {
	t.Helper()
	pool := pgtest.NewDB(t)
	w, err := consoletest.Seed(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return pool, w
}

// setupAt is a console on the seeded world, built by newConsoleAt, its
// log kept in b.log.
func setupAt(t testing.TB, overviewTTL time.Duration, now func() time.Time, change ...func(*console.Deps)) *bundle {
	t.Helper()
	pool, w := seeded(t)
	var log bytes.Buffer
	return &bundle{pool: pool, world: w, handler: newConsoleAt(t, pool, &log, overviewTTL, now, change...), log: &log}
}

func setup(t *testing.T) *bundle { return setupAt(t, 0, nil) }

// verifier verifies the tokens secret signs.
func verifier(t testing.TB) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(context.Background(), auth.Config{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// token returns a token of org and sub.
func token(t testing.TB, org uuid.UUID, sub string) string {
	t.Helper()
	tok, err := auth.SignToken(secret, org, sub, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// signIn signs in with a token of org and sub and returns the session
// cookie.
func (b *bundle) signIn(t testing.TB, org uuid.UUID, sub string) string {
	t.Helper()
	return b.signInWith(t, token(t, org, sub))
}

// operatorSignIn signs in as the operator olga and returns the session
// cookie.
func (b *bundle) operatorSignIn(t testing.TB) string {
	t.Helper()
	tok, err := auth.SignOperatorToken(secret, uuid.Nil, "olga", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return b.signInWith(t, tok)
}

// signInWith signs in with tok and returns the session cookie.
func (b *bundle) signInWith(t testing.TB, tok string) string {
	t.Helper()
	rec := b.do("POST", "/console/sign-in", "", url.Values{"token": {tok}}, nil)
	for _, c := range rec.Result().Cookies() {
		if c.Name == "searchd_console" && rec.Code == http.StatusSeeOther {
			return c.Value
		}
	}
	t.Fatalf("sign-in = %d without a session cookie", rec.Code)
	return ""
}

// do serves one request; cookie, when set, is the session cookie's value.
func (b *bundle) do(method, target, cookie string, form url.Values, header map[string]string) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: "searchd_console", Value: cookie})
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, r)
	return rec
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf returns the CSRF token a page of the session renders.
func (b *bundle) csrfOf(t *testing.T, cookie, page string) string {
	t.Helper()
	rec := b.do("GET", page, cookie, nil, nil)
	m := csrfField.FindStringSubmatch(rec.Body.String())
	if rec.Code != http.StatusOK || m == nil {
		t.Fatalf("GET %s = %d without a csrf field", page, rec.Code)
	}
	return m[1]
}

func (b *bundle) claimExists(t *testing.T, id uuid.UUID) bool {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM agent.idempotency_keys WHERE id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestSignInSetsAStrictHttpOnlyCookieAndNeverLogsTheToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := token(t, b.world.OrgA, "alice")
	var session string
	for _, tt := range []struct {
		target     string
		wantSecure bool
	}{
		{"http://console.test/console/sign-in", false},
		{"https://console.test/console/sign-in", true},
	} {
		rec := b.do("POST", tt.target, "", url.Values{"token": {tok}}, nil)
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/saved-searches" {
			t.Fatalf("POST %s = %d to %q, want 303 to the saved searches", tt.target, rec.Code, rec.Header().Get("Location"))
		}
		cookies := rec.Result().Cookies()
		if len(cookies) != 1 {
			t.Fatalf("sign-in set %d cookies, want 1", len(cookies))
		}
		c := cookies[0]
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/console/" || c.Secure != tt.wantSecure {
			t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path /console/, Secure %v", c, tt.wantSecure)
		}
		// The cookie holds a session's secret, never the token, and ends
		// with the token (an hour), well within the session lifetime.
		if strings.Contains(c.Value, tok) || strings.Count(c.Value, ".") != 0 || c.MaxAge < 3590 || c.MaxAge > 3600 {
			t.Errorf("session cookie %q with Max-Age %d: want a session secret that ends with the token's hour", c.Value, c.MaxAge)
		}
		if strings.Contains(rec.Header().Get("Location"), tok) {
			t.Errorf("the token is in the redirect")
		}
		session = c.Value
	}
	if rec := b.do("GET", "/console/saved-searches", session, nil, nil); rec.Code != http.StatusOK {
		t.Fatalf("a signed-in GET = %d", rec.Code)
	}
	if strings.Contains(b.log.String(), tok) || strings.Contains(b.log.String(), tok[strings.LastIndex(tok, ".")+1:]) ||
		strings.Contains(b.log.String(), session) {
		t.Errorf("the log holds the token or the session's secret:\n%s", b.log.String())
	}
	if !strings.Contains(b.log.String(), `"route":"GET /console/saved-searches"`) {
		t.Errorf("the access log has no line for the request:\n%s", b.log.String())
	}
}

// TestACookieNeverOutlivesTheSessionLifetime: a token whose exp is 2^53
// seconds away is refused outright (the maximum token lifetime), and a
// token within it gets a session of at most the session lifetime, whose
// cookie expires with it: no cookie for the year 285,428,751.
func TestACookieNeverOutlivesTheSessionLifetime(t *testing.T) {
	t.Parallel()
	b := setupAt(t, 0, nil, func(d *console.Deps) { d.SessionLifetime = 30 * time.Minute })
	pool := b.pool
	org := uuid.New()
	huge, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"org_id": org.String(), "exp": int64(1) << 53}).SignedString(secret)
	if rec := b.do("POST", "/console/sign-in", "", url.Values{"token": {huge}}, nil); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
		t.Errorf("sign-in with exp 2^53 = %d with %d cookies, want 401 and none", rec.Code, len(rec.Result().Cookies()))
	}
	day, _ := auth.SignToken(secret, org, "alice", time.Now(), 23*time.Hour)
	rec := b.do("POST", "/console/sign-in", "", url.Values{"token": {day}}, nil)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 || cookies[0].MaxAge != 1800 {
		t.Fatalf("sign-in with a 23 h token = %d, cookies %v; want one cookie of Max-Age 1800 (the session lifetime)", rec.Code, cookies)
	}
	var left time.Duration
	if err := pool.QueryRow(context.Background(), `SELECT expires_at - created_at FROM agent.console_sessions WHERE actor = 'alice'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 30*time.Minute {
		t.Errorf("the session lives %s, want the 30 m lifetime", left)
	}
}

// TestSignOutEndsTheSession: after sign-out the old cookie is refused,
// and it never was a bearer token (the API's verifier refuses it).
func TestSignOutEndsTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	session := b.signIn(t, b.world.OrgA, "alice")
	other := b.signIn(t, b.world.OrgA, "alice")
	if _, err := verifier(t).Verify(context.Background(), session); err == nil {
		t.Error("the API's verifier accepts a session's secret")
	}
	csrf := b.csrfOf(t, session, "/console/saved-searches")
	rec := b.do("POST", "/console/sign-out", session, url.Values{"csrf": {csrf}}, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/sign-in" {
		t.Fatalf("sign-out = %d to %q, want 303 to the sign-in page", rec.Code, rec.Header().Get("Location"))
	}
	if c := rec.Result().Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
		t.Errorf("sign-out cookies %v, want the session cookie cleared", c)
	}
	if rec := b.do("GET", "/console/saved-searches", session, nil, nil); rec.Code != http.StatusSeeOther {
		t.Errorf("GET with the signed-out cookie = %d, want 303 to sign in", rec.Code)
	}
	if rec := b.do("POST", "/console/sign-out", session, url.Values{"csrf": {csrf}}, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("POST with the signed-out cookie = %d, want 401", rec.Code)
	}
	if rec := b.do("GET", "/console/saved-searches", other, nil, nil); rec.Code != http.StatusOK {
		t.Errorf("another session of the same person after one signed out = %d, want 200", rec.Code)
	}
}

// TestTokenSignInIsForDevelopment: with token sign-in off, the form is
// not offered and a posted token is refused without a session.
func TestTokenSignInIsForDevelopment(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	b := &bundle{pool: pool, log: &bytes.Buffer{}}
	b.handler = newConsoleAt(t, pool, b.log, 0, nil, func(d *console.Deps) { d.TokenSignIn = false })
	page := b.do("GET", "/console/sign-in", "", nil, nil)
	if page.Code != http.StatusOK || strings.Contains(page.Body.String(), `name="token"`) ||
		!strings.Contains(page.Body.String(), "No way to sign in is configured") {
		t.Errorf("sign-in page without token sign-in or a provider = %d:\n%s", page.Code, page.Body.String())
	}
	rec := b.do("POST", "/console/sign-in", "", url.Values{"token": {token(t, uuid.New(), "alice")}}, nil)
	if rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
		t.Errorf("a posted token with token sign-in off = %d with %d cookies, want 403 and none", rec.Code, len(rec.Result().Cookies()))
	}
}

func TestSignInRefusesTokensTheAPIWouldRefuse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	expired, _ := auth.SignToken(secret, b.world.OrgA, "alice", time.Now().Add(-2*time.Hour), time.Hour)
	other, _ := auth.SignToken([]byte("another-secret-0123456789abcdefghij"), b.world.OrgA, "alice", time.Now(), time.Hour)
	for name, tok := range map[string]string{"garbage": "not-a-token", "expired": expired, "other secret": other, "empty": ""} {
		rec := b.do("POST", "/console/sign-in", "", url.Values{"token": {tok}}, nil)
		if rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
			t.Errorf("sign-in with a %s token = %d with %d cookies, want 401 and none", name, rec.Code, len(rec.Result().Cookies()))
		}
		if tok != "" {
			if rec := b.do("GET", "/console/saved-searches", tok, nil, nil); rec.Code != http.StatusSeeOther {
				t.Errorf("GET with a %s token as the cookie = %d, want 303 to sign in", name, rec.Code)
			}
		}
	}
}

// TestSignInRefusesARuntimeCredential: a runtime's token verifies, but it
// reports Run status and opens no console: 403, no cookie, no session.
func TestSignInRefusesARuntimeCredential(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rt, err := auth.SignRuntimeToken(secret, b.world.OrgA, "runtime-eu-1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rec := b.do("POST", "/console/sign-in", "", url.Values{"token": {rt}}, nil)
	if rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 || !strings.Contains(rec.Body.String(), "runtime credential") {
		t.Errorf("sign-in with a runtime credential = %d with %d cookies, want 403 naming it and none", rec.Code, len(rec.Result().Cookies()))
	}
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM agent.console_sessions WHERE actor = 'runtime-eu-1'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d sessions of the runtime (%v), want none", n, err)
	}
}

func TestEveryResponseCarriesAStrictContentSecurityPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.signIn(t, b.world.OrgA, "alice")
	op := b.operatorSignIn(t)
	for _, tt := range []struct{ target, cookie string }{
		{"/console/sign-in", ""},
		{"/console/saved-searches", tok},
		{"/console/saved-searches/" + b.world.Search.String(), tok},
		{"/console/operator/claims", op},
		{"/console/operator/claims", tok}, // 403
		{"/console/no-such-page", tok},    // 404
		{"/console/static/console.css", ""},
	} {
		rec := b.do("GET", tt.target, tt.cookie, nil, nil)
		csp := rec.Header().Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s (%d): CSP %q lacks %q", tt.target, rec.Code, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q allows unsafe sources", tt.target, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: headers %v lack nosniff or DENY", tt.target, rec.Header())
		}
		if strings.Contains(rec.Body.String(), "<script>") || strings.Contains(rec.Body.String(), "style=") {
			t.Errorf("GET %s renders inline script or style", tt.target)
		}
	}
}

func TestAnAuditorSeesNothingOfAnotherOrganization(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	tokB := b.signIn(t, w.OrgB, "eve")
	for _, target := range []string{
		"/console/saved-searches/" + w.Search.String(),
		"/console/saved-searches/" + w.Archived.String(),
		"/console/saved-searches/" + w.Search.String() + "/compare?a=" + w.FirstSnapshot.String() + "&b=" + w.SecondSnapshot.String(),
		"/console/snapshots/" + w.SecondSnapshot.String(),
		"/console/runs/" + w.SecondRun.String(),
		"/console/provider-jobs/" + w.Job.String(),
	} {
		rec := b.do("GET", target, tokB, nil, nil)
		if rec.Code != http.StatusNotFound {
			t.Errorf("org B GET %s = %d, want 404", target, rec.Code)
		}
		if strings.Contains(rec.Body.String(), consoletest.SearchName) {
			t.Errorf("org B GET %s shows org A's saved search", target)
		}
	}
	for _, target := range []string{
		"/console/saved-searches?archived=1",
		"/console/runs",
		"/console/runs?key=" + w.SecondKey,
		"/console/provider-jobs",
		"/console/saved-searches/" + w.SearchB.String(),
	} {
		rec := b.do("GET", target, tokB, nil, nil)
		body := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Fatalf("org B GET %s = %d", target, rec.Code)
		}
		for _, leak := range []string{consoletest.SearchName, consoletest.ArchivedName, w.SecondRun.String()[28:], "acme-job-5521", w.SecondKey} {
			if leak == w.SecondKey && strings.Contains(target, "key=") {
				body = strings.Replace(body, `value="`+w.SecondKey+`"`, "", 1) // the filter, echoed
			}
			if strings.Contains(body, leak) {
				t.Errorf("org B GET %s shows org A's %q", target, leak)
			}
		}
	}
	// And org A does see its own: the checks above can fail.
	tokA := b.signIn(t, w.OrgA, "alice")
	if body := b.do("GET", "/console/runs?key="+w.SecondKey, tokA, nil, nil).Body.String(); !strings.Contains(body, w.SecondRun.String()[28:]) {
		t.Errorf("org A's Run search by key does not show its Run")
	}
}

func TestOperatorViewsRefuseOrganizationTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tokA := b.signIn(t, b.world.OrgA, "alice")
	for _, target := range []string{"/console/operator/claims", "/console/operator/releases", "/console/operator/sweeper"} {
		rec := b.do("GET", target, tokA, nil, nil)
		if rec.Code != http.StatusForbidden || strings.Contains(rec.Body.String(), b.world.StuckKey) {
			t.Errorf("org token GET %s = %d, want 403 showing nothing", target, rec.Code)
		}
		if rec := b.do("GET", target, b.operatorSignIn(t), nil, nil); rec.Code != http.StatusOK {
			t.Errorf("operator GET %s = %d, want 200", target, rec.Code)
		}
	}
	// With the session's own CSRF token, a release by an organization's
	// token is still refused.
	csrf := b.csrfOf(t, tokA, "/console/saved-searches")
	rec := b.do("POST", "/console/operator/claims/"+b.world.Stuck.String()+"/release", tokA,
		url.Values{"csrf": {csrf}, "reason": {"try"}, "claimed_at": {time.Now().Format(time.RFC3339Nano)}}, nil)
	if rec.Code != http.StatusForbidden || !b.claimExists(t, b.world.Stuck) {
		t.Errorf("org token POST release = %d (claim kept %v), want 403 and the claim kept", rec.Code, b.claimExists(t, b.world.Stuck))
	}
	// The navigation offers no operator view to an organization.
	if body := b.do("GET", "/console/saved-searches", tokA, nil, nil).Body.String(); strings.Contains(body, "/console/operator/") {
		t.Errorf("an organization's navigation links an operator view")
	}
	// An operator token that names no organization reads no organization.
	if rec := b.do("GET", "/console/saved-searches", b.operatorSignIn(t), nil, nil); rec.Code != http.StatusForbidden {
		t.Errorf("operator without an organization GET saved searches = %d, want 403", rec.Code)
	}
}

// stuckForm is the release form of the stuck claim as the claims page
// renders it.
func (b *bundle) stuckForm(t *testing.T, cookie string) url.Values {
	t.Helper()
	page := b.do("GET", "/console/operator/claims", cookie, nil, nil).Body.String()
	m := regexp.MustCompile(`action="/console/operator/claims/` + b.world.Stuck.String() +
		`/release" class="release">\s*<input type="hidden" name="csrf" value="([^"]+)">\s*<input type="hidden" name="claimed_at" value="([^"]+)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the claims page has no release form for the stuck claim:\n%s", page)
	}
	return url.Values{"csrf": {m[1]}, "claimed_at": {m[2]}, "reason": {"worker gone"}}
}

func TestForceReleaseNeedsTheSessionsCSRFTokenAndASameOriginPost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operatorSignIn(t)
	form := b.stuckForm(t, op)
	target := "/console/operator/claims/" + b.world.Stuck.String() + "/release"
	mallory, _ := auth.SignOperatorToken(secret, uuid.Nil, "mallory", time.Now(), time.Hour)
	otherOp := b.signInWith(t, mallory)
	for _, tt := range []struct {
		name   string
		csrf   string
		header map[string]string
	}{
		{"no csrf", "", nil},
		{"another session's csrf", b.csrfOf(t, otherOp, "/console/operator/claims"), nil},
		{"a cross-site post", form.Get("csrf"), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"another origin", form.Get("csrf"), map[string]string{"Origin": "https://evil.example"}},
	} {
		f := url.Values{"claimed_at": form["claimed_at"], "reason": form["reason"]}
		if tt.csrf != "" {
			f.Set("csrf", tt.csrf)
		}
		rec := b.do("POST", target, op, f, tt.header)
		if rec.Code != http.StatusForbidden || !b.claimExists(t, b.world.Stuck) {
			t.Errorf("%s: POST release = %d, claim kept %v; want 403 and the claim kept", tt.name, rec.Code, b.claimExists(t, b.world.Stuck))
		}
	}
	rec := b.do("POST", target, op, form, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Location"), "released=") {
		t.Fatalf("a same-origin POST with the csrf token = %d to %q, want 303 released", rec.Code, rec.Header().Get("Location"))
	}
	if b.claimExists(t, b.world.Stuck) {
		t.Fatalf("the stuck claim is still stored after its release")
	}
	var actor, reason, via string
	if err := b.pool.QueryRow(context.Background(),
		`SELECT actor, reason, via FROM agent.claim_releases WHERE claim_id = $1`, b.world.Stuck).Scan(&actor, &reason, &via); err != nil {
		t.Fatalf("the release is not recorded: %v", err)
	}
	if actor != "olga" || reason != "worker gone" || via != "console" {
		t.Errorf("release recorded as (%q, %q, %q), want (olga, worker gone, console)", actor, reason, via)
	}
	if body := b.do("GET", "/console/operator/releases", op, nil, nil).Body.String(); !strings.Contains(body, "worker gone") {
		t.Errorf("the releases page does not show the release")
	}
}

func TestForceReleaseRefusesLiveChangedAndReasonlessReleases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operatorSignIn(t)
	form := b.stuckForm(t, op)
	post := func(id uuid.UUID, f url.Values) string {
		rec := b.do("POST", "/console/operator/claims/"+id.String()+"/release", op, f, nil)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("POST release = %d, want 303", rec.Code)
		}
		return rec.Header().Get("Location")
	}
	// The live claim: its lease has not passed.
	var liveAt time.Time
	if err := b.pool.QueryRow(context.Background(), `SELECT claimed_at FROM agent.idempotency_keys WHERE id = $1`, b.world.InFlight).Scan(&liveAt); err != nil {
		t.Fatal(err)
	}
	live := url.Values{"csrf": form["csrf"], "reason": {"x"}, "claimed_at": {liveAt.Format(time.RFC3339Nano)}}
	if loc := post(b.world.InFlight, live); !strings.Contains(loc, "refused=") || !b.claimExists(t, b.world.InFlight) {
		t.Errorf("release of a live lease went to %q; want refused and the claim kept", loc)
	}
	changed := url.Values{"csrf": form["csrf"], "reason": {"x"}, "claimed_at": {time.Now().Add(-time.Hour).Format(time.RFC3339Nano)}}
	if loc := post(b.world.Stuck, changed); !strings.Contains(loc, "changed") || !b.claimExists(t, b.world.Stuck) {
		t.Errorf("release of a claim seen at another claimed_at went to %q; want refused and the claim kept", loc)
	}
	reasonless := url.Values{"csrf": form["csrf"], "reason": {"  "}, "claimed_at": form["claimed_at"]}
	if loc := post(b.world.Stuck, reasonless); !strings.Contains(loc, "refused=") || !b.claimExists(t, b.world.Stuck) {
		t.Errorf("release without a reason went to %q; want refused and the claim kept", loc)
	}
	var completed uuid.UUID
	var completedAt time.Time
	if err := b.pool.QueryRow(context.Background(),
		`SELECT id, claimed_at FROM agent.idempotency_keys WHERE status = 'completed' LIMIT 1`).Scan(&completed, &completedAt); err != nil {
		t.Fatal(err)
	}
	done := url.Values{"csrf": form["csrf"], "reason": {"x"}, "claimed_at": {completedAt.Format(time.RFC3339Nano)}}
	if loc := post(completed, done); !strings.Contains(loc, "completed") || !b.claimExists(t, completed) {
		t.Errorf("release of a completed claim went to %q; want refused and the claim kept", loc)
	}
}

func TestCompareShowsTheBaselineAndBriefChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	tok := b.signIn(t, w.OrgA, "alice")
	// Either order: the older snapshot is always the left side.
	for _, q := range []string{"a=" + w.FirstSnapshot.String() + "&b=" + w.SecondSnapshot.String(),
		"a=" + w.SecondSnapshot.String() + "&b=" + w.FirstSnapshot.String()} {
		rec := b.do("GET", "/console/saved-searches/"+w.Search.String()+"/compare?"+q, tok, nil, nil)
		body := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Fatalf("compare = %d", rec.Code)
		}
		for _, want := range []string{
			`<li class="added"><span class="sign">+</span>` + w.AddedItem,
			`<li class="removed"><span class="sign">−</span>` + w.RemovedItem,
			`filters.seniority`, `<h1>v1 → v3</h1>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("compare?%s lacks %q", q, want)
			}
		}
	}
	// A snapshot of another saved search is not this one's to compare.
	var other uuid.UUID
	if err := b.pool.QueryRow(context.Background(),
		`SELECT id FROM agent.saved_search_snapshots WHERE saved_search_id = $1`, w.Archived).Scan(&other); err != nil {
		t.Fatal(err)
	}
	rec := b.do("GET", fmt.Sprintf("/console/saved-searches/%s/compare?a=%s&b=%s", w.Search, w.FirstSnapshot, other), tok, nil, nil)
	if rec.Code != http.StatusNotFound {
		t.Errorf("compare with another saved search's snapshot = %d, want 404", rec.Code)
	}
}

// TestEveryListCursorIsReadByTheOneDecoder sends each cursor parameter of
// every console list cursors in the cursors' own format that searchd did
// not mint: a MAC of zeros at a valid instant (a forgery of a client that
// knows the format), the unsigned version-1 format of before the upgrade,
// an instant PostgreSQL cannot hold (before 4713 BC), which once reached
// the SQL and answered 500 (SQLSTATE 22008, logged at ERROR) on every
// list, and one just past either end of the range the decoder takes: each
// must answer 400 and log no error.
func TestEveryListCursorIsReadByTheOneDecoder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	tok, op := b.signIn(t, w.OrgA, "alice"), b.operatorSignIn(t)
	pages := []struct{ path, param, cookie string }{
		{"/console/saved-searches", "cursor", tok},
		{"/console/saved-searches/" + w.Search.String(), "cursor", tok},
		{"/console/saved-searches/" + w.Search.String(), "occ", tok},
		{"/console/snapshots/" + w.FirstSnapshot.String(), "cursor", tok},
		{"/console/runs", "cursor", tok},
		{"/console/schedules", "cursor", tok},
		{"/console/provider-jobs", "cursor", tok},
		{"/console/provider-jobs/" + w.Job.String(), "cursor", tok},
		{"/console/operator/claims", "stuck", op},
		{"/console/operator/claims", "flight", op},
		{"/console/operator/inbound", "pending", op},
		{"/console/operator/inbound", "cursor", op},
		{"/console/operator/releases", "cursor", op},
		{"/console/operator/sweeper", "cursor", op},
		{"/console/operator/uncertain", "cursor", op},
		{"/console/operator/uncertain", "decisions", op},
	}
	at := func(t time.Time) string { return forgedCursor(2, t, uuid.New()) }
	cursors := []struct{ name, cursor string }{
		{"a forged MAC at a valid instant", at(time.Now())},
		{"a version-1 cursor", forgedCursor(1, time.Now(), uuid.New())},
		{"an instant before 4713 BC", at(time.UnixMicro(-211_000_000_000_000_000))},
		{"one microsecond before the first instant", at(keyset.MinInstant.Add(-time.Microsecond))},
		{"one microsecond after the last instant", at(keyset.MaxInstant.Add(time.Microsecond))},
		{"the first instant", at(keyset.MinInstant)},
		{"the last instant", at(keyset.MaxInstant)},
	}
	for _, p := range pages {
		for _, c := range cursors {
			b.log.Reset()
			target := p.path + "?" + url.Values{p.param: {c.cursor}}.Encode()
			if rec := b.do("GET", target, p.cookie, nil, nil); rec.Code != http.StatusBadRequest {
				t.Errorf("GET %s (%s ?%s) = %d, want 400", target, c.name, p.param, rec.Code)
			}
			if strings.Contains(b.log.String(), `"level":"ERROR"`) {
				t.Errorf("GET %s (%s ?%s) logged an error: %s", target, c.name, p.param, b.log.String())
			}
		}
	}
}

func TestBadFiltersAndPathsAnswer4xx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.signIn(t, b.world.OrgA, "alice")
	for target, want := range map[string]int{
		"/console/runs?from=yesterday":                                    http.StatusBadRequest,
		"/console/runs?status=lost":                                       http.StatusBadRequest,
		"/console/runs?cursor=AAAA":                                       http.StatusBadRequest,
		"/console/runs?key=" + strings.Repeat("k", 256):                   http.StatusBadRequest,
		"/console/saved-searches?cursor=%ff":                              http.StatusBadRequest,
		"/console/runs/not-a-uuid":                                        http.StatusNotFound,
		"/console/runs/" + uuid.NewString():                               http.StatusNotFound,
		"/console/saved-searches/" + b.world.Search.String() + "/compare": http.StatusBadRequest,
	} {
		if rec := b.do("GET", target, tok, nil, nil); rec.Code != want {
			t.Errorf("GET %s = %d, want %d", target, rec.Code, want)
		}
	}
	op := b.operatorSignIn(t)
	for target, want := range map[string]int{
		"/console/operator/claims?key=k":                      http.StatusBadRequest, // a key needs its organization and scope
		"/console/operator/claims?org=nope":                   http.StatusBadRequest,
		"/console/operator/claims?stuck=AAAA":                 http.StatusBadRequest,
		"/console/operator/sweeper?cursor=AAAA":               http.StatusBadRequest,
		"/console/operator/releases?actor=" + "%00":           http.StatusBadRequest,
		"/console/operator/claims/" + uuid.NewString() + "/x": http.StatusNotFound,
	} {
		if rec := b.do("GET", target, op, nil, nil); rec.Code != want {
			t.Errorf("operator GET %s = %d, want %d", target, rec.Code, want)
		}
	}
	// A path id that is not a UUID names nothing on a form's POST too.
	if rec := b.do("POST", "/console/operator/claims/not-a-uuid/release", op, b.stuckForm(t, op), nil); rec.Code != http.StatusNotFound {
		t.Errorf("POST a release of not-a-uuid = %d, want 404", rec.Code)
	}
}

func TestRunListsPageThroughEveryRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	store := runs.NewStore(b.pool, runs.Config{})
	for i := range 120 {
		name := "cap"
		if _, _, err := store.Admit(ctx, runs.AdmitParams{OrganizationID: b.world.OrgA, Kind: runs.KindCapability,
			StartKey: runs.DirectStartKey(fmt.Sprintf("bulk-%03d", i)), RequestHash: "h", Name: &name, Actor: "bulk"}); err != nil {
			t.Fatal(err)
		}
	}
	tok := b.signIn(t, b.world.OrgA, "alice")
	seen := map[string]bool{}
	next := regexp.MustCompile(`href="(/console/runs\?[^"]*cursor=[^"]+)" class="next"`)
	runLink := regexp.MustCompile(`href="/console/runs/([0-9a-f-]{36})"`)
	target, pages := "/console/runs?actor=bulk", 0
	for target != "" {
		pages++
		body := b.do("GET", strings.ReplaceAll(target, "&amp;", "&"), tok, nil, nil).Body.String()
		for _, m := range runLink.FindAllStringSubmatch(body, -1) {
			seen[m[1]] = true
		}
		target = ""
		if m := next.FindStringSubmatch(body); m != nil {
			target = m[1]
		}
	}
	if len(seen) != 120 || pages != 3 {
		t.Errorf("paging the actor's Runs saw %d Runs in %d pages, want 120 in 3", len(seen), pages)
	}
}

func TestAnOperatorResolvesUncertainCallsWithTheirEvidence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	op := b.operatorSignIn(t)
	page := b.do("GET", "/console/operator/uncertain", op, nil, nil)
	body := page.Body.String()
	if page.Code != http.StatusOK {
		t.Fatalf("GET uncertain = %d", page.Code)
	}
	for _, want := range []string{w.UncertainKey, w.UncertainRetryKey, "no acknowledgement after 30 s", "connection reset"} {
		if !strings.Contains(body, want) {
			t.Errorf("the uncertain page lacks %q", want)
		}
	}
	if rec := b.do("GET", "/console/operator/uncertain", b.signIn(t, w.OrgA, "alice"), nil, nil); rec.Code != http.StatusForbidden {
		t.Errorf("an organization token GET uncertain = %d, want 403", rec.Code)
	}
	csrf := csrfField.FindStringSubmatch(body)[1]
	decide := func(key, as, reason, csrf string) *httptest.ResponseRecorder {
		return b.do("POST", "/console/operator/uncertain/resolve", op, url.Values{"csrf": {csrf}, "org": {w.OrgA.String()},
			"scope": {consoletest.UncertainScope}, "key": {key}, "as": {as}, "reason": {reason}}, nil)
	}
	answer := func(id uuid.UUID) string {
		var out string
		err := b.pool.QueryRow(context.Background(), `SELECT coalesce((SELECT response::text FROM agent.idempotency_keys WHERE id = $1), 'gone')`, id).Scan(&out)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if rec := decide(w.UncertainKey, "delivered", "vendor console shows it sent", ""); rec.Code != http.StatusForbidden || !strings.Contains(answer(w.Uncertain), "uncertain") {
		t.Errorf("a decision without the CSRF token = %d, answer %s; want 403 and the call still uncertain", rec.Code, answer(w.Uncertain))
	}
	if loc := decide(w.UncertainKey, "delivered", " ", csrf).Header().Get("Location"); !strings.Contains(loc, "refused=") || !strings.Contains(answer(w.Uncertain), "uncertain") {
		t.Errorf("a decision without a reason went to %q; want refused", loc)
	}
	if loc := decide(w.UncertainKey, "delivered", "vendor console shows it sent", csrf).Header().Get("Location"); !strings.Contains(loc, "resolved=") {
		t.Fatalf("mark delivered went to %q, want resolved", loc)
	}
	if got := answer(w.Uncertain); !strings.Contains(got, `"outcome": "ok"`) || !strings.Contains(got, `"resolved_by": "olga"`) {
		t.Errorf("after mark delivered the answer is %s, want ok resolved by olga", got)
	}
	if loc := decide(w.UncertainKey, "retry", "again", csrf).Header().Get("Location"); !strings.Contains(loc, "refused=not_uncertain") {
		t.Errorf("a second decision went to %q, want refused as not uncertain", loc)
	}
	if loc := decide(w.UncertainRetryKey, "retry", "vendor has no record of it", csrf).Header().Get("Location"); !strings.Contains(loc, "resolved=") || answer(w.UncertainRetry) != "gone" {
		t.Errorf("authorize retry went to %q with the answer %s; want resolved and the answer gone", loc, answer(w.UncertainRetry))
	}
	var n int
	if err := b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM agent.tool_call_resolutions WHERE actor = 'olga' AND organization_id = $1`, w.OrgA).Scan(&n); err != nil || n != 2 {
		t.Errorf("recorded decisions by olga = %d (%v), want 2", n, err)
	}
	after := b.do("GET", "/console/operator/uncertain", op, nil, nil).Body.String()
	if strings.Contains(after, `data-key="`+w.UncertainKey+`"`) || !strings.Contains(after, "vendor console shows it sent") {
		t.Errorf("after the decisions the page still offers the call, or does not list the decision")
	}
}

func TestTheInboundPanelShowsTheBacklogAndTheApplierLag(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operatorSignIn(t)
	rec := b.do("GET", "/console/operator/inbound", op, nil, nil)
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("GET inbound = %d", rec.Code)
	}
	for _, want := range []string{
		`<div class="tile-n">1</div><div class="tile-l">pending arrivals</div>`, // the stalled one
		"12 min", "the applier is not keeping up", "lock timeout", b.world.PendingDelivery,
		"msg_2Kx1", "msg_9Qa7", // applied arrivals
		// Their copies, dropped and counted on the arrival.
		`<span class="badge b-duplicate">1 duplicate</span>`,
		`<span class="badge b-hash_mismatch">1 hash mismatch</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the inbound page lacks %q", want)
		}
	}
	if rec := b.do("GET", "/console/operator/inbound?status=pending", op, nil, nil); strings.Contains(rec.Body.String(), "msg_9Qa7") {
		t.Errorf("the pending filter lists an applied arrival")
	}
	if rec := b.do("GET", "/console/operator/inbound?status=lost", op, nil, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("an unknown status = %d, want 400", rec.Code)
	}
	if rec := b.do("GET", "/console/operator/inbound", b.signIn(t, b.world.OrgA, "alice"), nil, nil); rec.Code != http.StatusForbidden {
		t.Errorf("an organization token GET inbound = %d, want 403", rec.Code)
	}
}

// TestTheRunPageShowsItsTimeline: the Run page lists the Run's life in
// order: admitted, each delivery attempt with the runtime's answer,
// dispatched, each status report with who made it; a refused dispatch
// shows its answer.
func TestTheRunPageShowsItsTimeline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.signIn(t, b.world.OrgA, "alice")
	rec := b.do("GET", "/console/runs/"+b.world.SecondRun.String(), tok, nil, nil)
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("Run page = %d", rec.Code)
	}
	section := body[strings.Index(body, "<h2>Timeline</h2>"):]
	last := -1
	for _, want := range []string{">admitted<", ">delivery 1<", "503 Service Unavailable runtime warming up", ">delivery 2<",
		"the runtime acknowledged the delivery", ">reported<", ">running<", "runtime-eu-1", ">succeeded<",
		"result: " + b.world.ResultRef} {
		i := strings.Index(section[last+1:], want)
		if i < 0 {
			t.Errorf("the timeline lacks %q after the previous event:\n%s", want, section[:min(len(section), 4000)])
			continue
		}
		last += 1 + i
	}
	if !strings.Contains(section, `Dispatch to the runtime: <span class="badge b-dispatched">dispatched</span>`) ||
		!strings.Contains(section, "2 attempts") || !strings.Contains(section, `Version <span id="run-version">4</span>`) {
		t.Errorf("the timeline's summary lacks the dispatch state, its attempts or the version:\n%s", section[:min(len(section), 1500)])
	}
	body = b.do("GET", "/console/runs/"+b.world.DirectRun.String(), tok, nil, nil).Body.String()
	if !strings.Contains(body, `<span class="badge b-failed">failed</span>`) || !strings.Contains(body, "unknown capability enrich.company") {
		t.Errorf("the refused Run's page lacks its failed dispatch and the runtime's answer")
	}
	// Another organization sees none of it.
	if rec := b.do("GET", "/console/runs/"+b.world.SecondRun.String(), b.signIn(t, b.world.OrgB, "eve"), nil, nil); rec.Code != http.StatusNotFound {
		t.Errorf("org B's auditor on org A's Run page = %d, want 404", rec.Code)
	}
}

// TestASavedSearchPageShowsItsScheduleAndOccurrences: the schedule, its
// next due time, each occurrence with its outcome and Run, and the
// snapshots the scheduler froze marked as such; another organization sees
// none of it; a saved search without a schedule says so.
func TestASavedSearchPageShowsItsScheduleAndOccurrences(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	tok := b.signIn(t, w.OrgA, "alice")
	rec := b.do("GET", "/console/saved-searches/"+w.Scheduled.String(), tok, nil, nil)
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("GET the scheduled saved search = %d", rec.Code)
	}
	for _, want := range []string{
		"cron <code>0 9 * * *</code>", "in Europe/Berlin", `<span class="badge b-live">live</span>`,
		`<span class="badge b-succeeded">started</span>`, `<span class="badge b-archived">missed</span>`,
		`href="/console/runs/` + w.ScheduledRun.String() + `"`, "scheduled</span>", "<dd>24 h <span",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scheduled saved search's page lacks %q", want)
		}
	}
	if n := strings.Count(body, `<span class="badge b-succeeded">started</span>`); n != 2 {
		t.Errorf("%d started occurrences shown, want 2", n)
	}
	if body := b.do("GET", "/console/saved-searches/"+w.Search.String(), tok, nil, nil).Body.String(); !strings.Contains(body, "No schedule") {
		t.Errorf("a saved search without a schedule does not say so")
	}
	if rec := b.do("GET", "/console/saved-searches/"+w.Scheduled.String()+"?occ=nope", tok, nil, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("a foreign occurrence cursor = %d, want 400", rec.Code)
	}
	if rec := b.do("GET", "/console/saved-searches/"+w.Scheduled.String(), b.signIn(t, w.OrgB, "eve"), nil, nil); rec.Code != http.StatusNotFound ||
		strings.Contains(rec.Body.String(), consoletest.ScheduledName) {
		t.Errorf("org B GET the scheduled saved search = %d, want 404 showing nothing", rec.Code)
	}
}

// TestASnapshotPageSaysWhoStartedIt: a snapshot's page names its origin,
// a start through the API or its saved search's schedule (issue 37).
func TestASnapshotPageSaysWhoStartedIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world
	tok := b.signIn(t, w.OrgA, "alice")
	page := "/console/snapshots/" + w.SecondSnapshot.String()
	if body := b.do("GET", page, tok, nil, nil).Body.String(); !strings.Contains(body, "started through the API") {
		t.Errorf("an API start's snapshot page does not say so:\n%s", body)
	}
	// Snapshots are immutable: a copy of it, frozen by the schedule (its
	// stored columns; the generated ones follow).
	scheduled := uuid.New()
	var cols, rcols string
	if err := b.pool.QueryRow(context.Background(), `SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position),
			string_agg('r.' || quote_ident(column_name), ', ' ORDER BY ordinal_position)
		FROM information_schema.columns
		WHERE table_schema = 'agent' AND table_name = 'saved_search_snapshots' AND is_generated = 'NEVER'`).Scan(&cols, &rcols); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(context.Background(), `INSERT INTO agent.saved_search_snapshots (`+cols+`)
		SELECT `+rcols+` FROM agent.saved_search_snapshots s,
			jsonb_populate_record(NULL::agent.saved_search_snapshots,
				to_jsonb(s) || jsonb_build_object('id', $2::uuid, 'origin', 'schedule')) r
		WHERE s.id = $1`, w.SecondSnapshot, scheduled); err != nil {
		t.Fatal(err)
	}
	page = "/console/snapshots/" + scheduled.String()
	if body := b.do("GET", page, tok, nil, nil).Body.String(); !strings.Contains(body, "started by its schedule") {
		t.Errorf("a scheduled start's snapshot page does not say so:\n%s", body)
	}
}
