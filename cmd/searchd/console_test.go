package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
)

func TestServeServesTheConsoleBesideTheAPI(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": emptyDatabase(t), "SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_ADDR": "127.0.0.1:0", "SEARCHD_SWEEP_INTERVAL": "0s"}
	if h := newHarness(env); h.run("migrate") != 0 {
		t.Fatalf("migrate: %s", h.stderr.String())
	}
	h := newHarness(env)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exit := make(chan int, 1)
	go func() { exit <- h.app.run(ctx, []string{"serve"}) }()
	var addr string
	select {
	case addr = <-h.addrs:
	case code := <-exit:
		t.Fatalf("serve exited %d: %s", code, h.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	base := "http://" + addr
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
	cancel()
	if code := <-exit; code != 0 {
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
