package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/testkit/oidctest"
)

func TestServeServesTheConsoleBesideTheAPI(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": emptyDatabase(t), "SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_ADDR": "127.0.0.1:0", "SEARCHD_SWEEP_INTERVAL": "0s", "SEARCHD_CONSOLE_TOKEN_SIGN_IN": "true"}
	if h := newHarness(env); h.run("migrate") != 0 {
		t.Fatalf("migrate: %s", h.stderr.String())
	}
	h, base, stop := startServe(t, env)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, cookie *http.Cookie) *http.Response {
		req, _ := http.NewRequest("GET", base+path, nil)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := get("/console/sign-in", nil); res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("GET /console/sign-in = %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	if res := get("/console", nil); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console = %d to %q, want 301 to /console/", res.StatusCode, res.Header.Get("Location"))
	}
	if res := get("/readyz", nil); res.StatusCode != http.StatusOK || res.Header.Get("Content-Security-Policy") != "" {
		t.Errorf("GET /readyz = %d with CSP %q: the API is not the console's", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	tok, err := auth.SignOperatorToken([]byte(goodSecret), uuid.Nil, "olga", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.PostForm(base+"/console/sign-in", url.Values{"token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("sign-in = %d with %d cookies", res.StatusCode, len(res.Cookies()))
	}
	for _, p := range []string{"/console/operator/claims", "/console/operator/sweeper", "/console/operator/releases"} {
		if res := get(p, res.Cookies()[0]); res.StatusCode != http.StatusOK {
			t.Errorf("operator GET %s = %d", p, res.StatusCode)
		}
	}
	if strings.Contains(h.stderr.String(), tok) {
		t.Errorf("serve logged the token")
	}
	if !strings.Contains(h.stderr.String(), "token sign-in is on") {
		t.Errorf("serve with token sign-in on did not warn of it:\n%s", h.stderr.String())
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d: %s", code, h.stderr.String())
	}
}

func TestTokenOperatorPrintsTheRoleClaim(t *testing.T) {
	t.Parallel()
	h := newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
	if code := h.run("token", "--operator", "--sub", "olga"); code != 0 {
		t.Fatalf("token --operator = %d, stderr %q", code, h.stderr.String())
	}
	var claims auth.Claims
	if _, err := jwt.NewParser().ParseWithClaims(strings.TrimSpace(h.stdout.String()), &claims,
		func(*jwt.Token) (any, error) { return []byte(goodSecret), nil }); err != nil {
		t.Fatal(err)
	}
	if claims.Role != auth.RoleOperator || claims.Subject != "olga" || claims.OrgID != "" {
		t.Errorf("operator token claims = %+v, want role operator, sub olga, no organization", claims)
	}
	// An organization's token never carries the role.
	h = newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
	h.run("token", "--org", uuid.NewString(), "--sub", "alice")
	claims = auth.Claims{}
	if _, err := jwt.NewParser().ParseWithClaims(strings.TrimSpace(h.stdout.String()), &claims,
		func(*jwt.Token) (any, error) { return []byte(goodSecret), nil }); err != nil || claims.Role != "" {
		t.Errorf("organization token role = %q (%v), want none", claims.Role, err)
	}
	h = newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
	if code := h.run("token", "--operator"); code != 2 || !strings.Contains(h.stderr.String(), "--sub: is required with --operator") {
		t.Errorf("token --operator without --sub = %d %q, want 2 naming --sub", code, h.stderr.String())
	}
}

// TestServeWithTheCompanysProvider: serve configured with a real provider
// accepts its access tokens on /v1 beside HS256 ones, refuses one for
// another audience, offers the provider's sign-in on the console and no
// token form, and refuses to start when the console's client id is the
// API's audience.
func TestServeWithTheCompanysProvider(t *testing.T) {
	t.Parallel()
	org := uuid.New()
	p := oidctest.StartT(t, oidctest.Config{})
	keys, err := p.Keys()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": emptyDatabase(t), "SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_ADDR": "127.0.0.1:0", "SEARCHD_SWEEP_INTERVAL": "0s",
		"SEARCHD_OIDC_ISSUER": p.Issuer, "SEARCHD_OIDC_AUDIENCE": "searchd-api", "SEARCHD_OIDC_ORG_CLAIM": "tenant",
		"SEARCHD_OIDC_CLIENT_ID": "searchd-console", "SEARCHD_OIDC_CLIENT_SECRET": "s3cret",
		"SEARCHD_OIDC_REDIRECT_URL": "http://127.0.0.1:9/console/oidc/callback"}
	if h := newHarness(env); h.run("migrate") != 0 {
		t.Fatalf("migrate: %s", h.stderr.String())
	}
	same := maps.Clone(env)
	same["SEARCHD_OIDC_CLIENT_ID"] = "searchd-api"
	if h := newHarness(same); h.run("serve") != 2 || !strings.Contains(h.stderr.String(), "SEARCHD_OIDC_CLIENT_ID: is the API's audience") {
		t.Errorf("serve with the client id the audience: stderr %q, want exit 2 naming the setting", h.stderr.String())
	}
	h, base, stop := startServe(t, env)
	get := func(path, bearer string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	now := time.Now().Unix()
	sign := func(aud string) string {
		tok, err := p.Sign("ec", fmt.Sprintf(`{"alg":"ES256","kid":%q}`, keys.EC), fmt.Sprintf(
			`{"iss":%q,"aud":%q,"sub":"alice","tenant":%q,"iat":%d,"exp":%d}`, p.Issuer, aud, org, now, now+600))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	hs, _ := auth.SignToken([]byte(goodSecret), org, "bob", time.Now(), time.Hour)
	for _, tt := range []struct {
		name, token string
		want        int
	}{
		{"the provider's token", sign("searchd-api"), http.StatusOK},
		{"an HS256 token", hs, http.StatusOK},
		{"the provider's token for another audience", sign("searchd-console"), http.StatusUnauthorized},
	} {
		if got := get("/v1/saved-searches", tt.token); got != tt.want {
			t.Errorf("%s: GET /v1/saved-searches = %d, want %d", tt.name, got, tt.want)
		}
	}
	res, err := http.Get(base + "/console/sign-in")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `action="/console/sign-in/provider"`) || strings.Contains(string(body), `name="token"`) {
		t.Errorf("the console's sign-in page under serve with a provider:\n%s", body)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d: %s", code, h.stderr.String())
	}
}

// startServe runs serve in process on env (see [harness.start]) and
// returns once it serves, with its base URL.
func startServe(t *testing.T, env map[string]string) (h *harness, base string, stop func() int) {
	t.Helper()
	h = newHarness(env)
	addr, stop := h.start(t, "serve")
	return h, "http://" + addr, stop
}
