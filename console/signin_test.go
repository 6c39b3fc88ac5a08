package console_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/internal/testkit/oidctest"
)

// ssoWorld is a console registered at a real provider, served on
// loopback, with the provider's people: alice of organization A, olga an
// operator of none, nobody of none.
type ssoWorld struct {
	p      *oidctest.Provider
	srv    *httptest.Server
	b      *bundle
	client oidctest.Client
	// v is the verifier of the API's tokens the console shares.
	v *auth.Verifier
}

const operatorRole = "searchd-operator"

func newSSOWorld(t *testing.T) *ssoWorld {
	t.Helper()
	pool, w := seeded(t)
	sw := &ssoWorld{b: &bundle{pool: pool, world: w, log: &bytes.Buffer{}}}
	// The console's address is needed before the provider starts (its
	// redirect URI), and the provider's before the console is built.
	var handler http.Handler
	sw.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { handler.ServeHTTP(rw, r) }))
	t.Cleanup(sw.srv.Close)
	sw.client = oidctest.Client{ID: "searchd-console", Secret: "console-secret",
		RedirectURIs: []string{sw.srv.URL + "/console/oidc/callback"}}
	sw.p = oidctest.StartT(t, oidctest.Config{
		Clients: []oidctest.Client{sw.client},
		Users: []oidctest.User{
			{Username: "alice", Password: "alice-pw", Org: w.OrgA.String()},
			{Username: "olga", Password: "olga-pw", Roles: []string{"staff", operatorRole}},
			{Username: "nobody", Password: "nobody-pw"},
		},
	})
	v, err := auth.NewVerifier(t.Context(), auth.Config{OIDC: &auth.OIDCConfig{Issuer: sw.p.Issuer, Audience: "searchd",
		OperatorRole: operatorRole}})
	if err != nil {
		t.Fatal(err)
	}
	sw.v = v
	signIn, err := auth.NewSignIn(v, auth.SignInConfig{ClientID: sw.client.ID, ClientSecret: sw.client.Secret,
		RedirectURL: sw.client.RedirectURIs[0]})
	if err != nil {
		t.Fatal(err)
	}
	handler = newConsoleAt(t, pool, sw.b.log, 0, nil, func(d *console.Deps) {
		d.SignIn, d.TokenSignIn, d.Verifier = signIn, false, nil
	})
	sw.b.handler = handler
	return sw
}

// browser is a cookie jar that follows redirects, as a browser does.
func browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

// signIn drives a sign-in: the console's button, the provider's login
// page, the callback. It returns the callback's answer (its body read).
func (sw *ssoWorld) signIn(t *testing.T, c *http.Client, username, password string) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(sw.srv.URL+"/console/sign-in/provider", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if !strings.HasPrefix(resp.Request.URL.String(), sw.p.Issuer+"/login/username") || id == "" {
		t.Fatalf("the console's button led to %s, want the provider's login page", resp.Request.URL)
	}
	resp, err = c.PostForm(sw.p.Issuer+"/login/username", url.Values{"id": {id}, "username": {username}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func (sw *ssoWorld) cookie(c *http.Client, name string) string {
	u, _ := url.Parse(sw.srv.URL + "/console/oidc/callback")
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == name {
			return ck.Value
		}
	}
	return ""
}

// TestSignInThroughTheProvider: a person signs in at the provider and
// lands in the console with a server-side session of their organization;
// an operator without one lands on the operator views; the session is in
// the database and its cookie is no bearer token.
func TestSignInThroughTheProvider(t *testing.T) {
	t.Parallel()
	sw := newSSOWorld(t)
	page := sw.b.do("GET", "/console/sign-in", "", nil, nil)
	if !strings.Contains(page.Body.String(), `action="/console/sign-in/provider"`) || strings.Contains(page.Body.String(), `name="token"`) {
		t.Errorf("the sign-in page lacks the provider's button or offers the token form:\n%s", page.Body.String())
	}
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+sw.p.Issuer+";") {
		t.Errorf("the sign-in page's CSP %q does not admit the provider as the form's redirect", csp)
	}

	for _, tt := range []struct {
		user, password, landing string
		org                     uuid.UUID
		role                    string
	}{
		{"alice", "alice-pw", "/console/saved-searches", sw.b.world.OrgA, ""},
		{"olga", "olga-pw", "/console/operator/claims", uuid.Nil, "operator"},
	} {
		c := browser()
		resp, body := sw.signIn(t, c, tt.user, tt.password)
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/console/oidc/callback" ||
			resp.Header.Get("Refresh") != "0; url="+tt.landing || !strings.Contains(body, `href="`+tt.landing+`"`) {
			t.Fatalf("%s: the callback = %d at %s, Refresh %q; want 200 continuing to %s:\n%s", tt.user, resp.StatusCode,
				resp.Request.URL, resp.Header.Get("Refresh"), tt.landing, body)
		}
		if sw.cookie(c, "searchd_console_flow") != "" {
			t.Errorf("%s: the flow cookie outlived the callback", tt.user)
		}
		session := sw.cookie(c, "searchd_console")
		var org *uuid.UUID
		var role, via string
		if err := sw.b.pool.QueryRow(t.Context(), `SELECT organization_id, role, via FROM agent.console_sessions
			WHERE expires_at - created_at = interval '8 hours' AND actor <> '' ORDER BY created_at DESC LIMIT 1`).Scan(&org, &role, &via); err != nil {
			t.Fatal(err)
		}
		if (org == nil) != (tt.org == uuid.Nil) || org != nil && *org != tt.org || role != tt.role || via != "oidc" {
			t.Errorf("%s: the session row has organization %v, role %q, via %q; want %s, %q, oidc", tt.user, org, role, via, tt.org, tt.role)
		}
		resp, err := c.Get(sw.srv.URL + tt.landing)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != tt.landing {
			t.Errorf("%s: GET %s = %d at %s, want 200 there", tt.user, tt.landing, resp.StatusCode, resp.Request.URL.Path)
		}
		if _, err := sw.v.Verify(t.Context(), session); session == "" || err == nil {
			t.Errorf("%s: the session's secret verifies as a bearer token", tt.user)
		}
	}
}

// TestTheCallbackRefusesWhatIsNotItsSignIn: a callback without the flow
// cookie, with another state, with the provider's refusal, or for a
// person without an organization or the operator role, makes no session.
func TestTheCallbackRefusesWhatIsNotItsSignIn(t *testing.T) {
	t.Parallel()
	sw := newSSOWorld(t)
	count := func() int {
		var n int
		if err := sw.b.pool.QueryRow(t.Context(), `SELECT count(*) FROM agent.console_sessions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A person the console does not admit.
	resp, body := sw.signIn(t, browser(), "nobody", "nobody-pw")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "must carry an organization") {
		t.Errorf("nobody's callback = %d, want 403 saying why:\n%s", resp.StatusCode, body)
	}

	// A callback replayed from another browser: the code is real, the
	// flow cookie is not this browser's.
	c := browser()
	c.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
		if r.URL.Path == "/console/oidc/callback" {
			return http.ErrUseLastResponse
		}
		return nil
	}
	first, err := c.PostForm(sw.srv.URL+"/console/sign-in/provider", nil)
	if err != nil {
		t.Fatal(err)
	}
	first.Body.Close()
	id := first.Request.URL.Query().Get("authRequestID")
	resp, err = c.PostForm(sw.p.Issuer+"/login/username", url.Values{"id": {id}, "username": {"alice"}, "password": {"alice-pw"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	callback := resp.Header.Get("Location")
	if !strings.Contains(callback, "code=") {
		t.Fatalf("the provider answered %d to %q, want a redirect to the callback with a code", resp.StatusCode, callback)
	}
	cb, _ := url.Parse(callback)
	flow := sw.cookie(c, "searchd_console_flow")
	forgedState := cb.Query()
	forgedState.Set("state", "another-state")
	for _, tt := range []struct {
		name, query, flow string
		want              int
	}{
		{"no flow cookie", cb.RawQuery, "", http.StatusBadRequest},
		{"another state", forgedState.Encode(), flow, http.StatusBadRequest},
		{"the provider refused", "error=access_denied&state=" + cb.Query().Get("state"), flow, http.StatusUnauthorized},
		{"a flow cookie that is no flow", cb.RawQuery, "garbage", http.StatusBadRequest},
	} {
		r := httptest.NewRequest("GET", "/console/oidc/callback?"+tt.query, nil)
		if tt.flow != "" {
			r.AddCookie(&http.Cookie{Name: "searchd_console_flow", Value: tt.flow})
		}
		rec := httptest.NewRecorder()
		sw.b.handler.ServeHTTP(rec, r)
		if rec.Code != tt.want || rec.Result().Cookies()[0].Name != "searchd_console_flow" || len(rec.Result().Cookies()) != 1 {
			t.Errorf("%s: callback = %d with cookies %v, want %d and only the flow cookie cleared", tt.name, rec.Code, rec.Result().Cookies(), tt.want)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("%d sessions after refused callbacks, want none", n)
	}
	// The real callback, in its own browser: one session.
	resp, err = c.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || count() != 1 {
		t.Errorf("the real callback = %d with %d sessions, want 200 and one", resp.StatusCode, count())
	}
	// The same code again: the provider spent it.
	resp, err = c.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || count() != 1 {
		t.Errorf("the callback replayed = %d with %d sessions, want a refusal and still one", resp.StatusCode, count())
	}
}
