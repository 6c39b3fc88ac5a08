package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/servicekeys"
)

func TestTokenAdminPrintsAnAdminsToken(t *testing.T) {
	t.Parallel()
	org := uuid.NewString()
	h := newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
	if code := h.run("token", "--admin", "--org", org, "--sub", "ada"); code != 0 {
		t.Fatalf("token --admin = %d, stderr %q", code, h.stderr.String())
	}
	var claims auth.Claims
	if _, err := jwt.NewParser().ParseWithClaims(strings.TrimSpace(h.stdout.String()), &claims,
		func(*jwt.Token) (any, error) { return []byte(goodSecret), nil }); err != nil {
		t.Fatal(err)
	}
	if claims.Role != auth.RoleAdmin || claims.Subject != "ada" || claims.OrgID != org {
		t.Errorf("admin token claims = %+v, want role admin, sub ada, org %s", claims, org)
	}
	for _, args := range [][]string{
		{"token", "--admin", "--org", org},
		{"token", "--admin", "--sub", "ada"},
		{"token", "--admin", "--runtime", "--org", org, "--sub", "r"},
	} {
		h = newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
		if code := h.run(args...); code != 2 {
			t.Errorf("%v = %d %q, want 2", args, code, h.stderr.String())
		}
	}
}

// keysRun runs `searchd keys args...` against dbURL as $USER olga and
// returns the exit status, stdout and stderr.
func keysRun(dbURL string, args ...string) (int, string, string) {
	h := newHarness(map[string]string{"DATABASE_URL": dbURL, "USER": "olga"})
	code := h.run(append([]string{"keys"}, args...)...)
	return code, h.stdout.String(), h.stderr.String()
}

func TestKeysCreateListRevoke(t *testing.T) {
	t.Parallel()
	dbURL, _ := newDB(t)
	org := uuid.NewString()
	code, out, errOut := keysRun(dbURL, "create", "--org", org, "--name", "runtime eu-1", "--scope", "runs:report", "--expires-in", "720h")
	token := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(token, "sdk_"+strings.ReplaceAll(org, "-", "")+"_") || strings.Count(out, "\n") != 1 ||
		!strings.Contains(errOut, "shown this once") {
		t.Fatalf("keys create = %d\nstdout %q\nstderr %q\nwant the token alone on stdout", code, out, errOut)
	}
	code, out, _ = keysRun(dbURL, "create", "--org", org, "--name", "backend", "--scope", "starts:write,read", "--json")
	var created struct {
		servicekeys.Key
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &created); code != 0 || err != nil || created.Token == "" || created.CreatedBy != "olga" ||
		len(created.Scopes) != 2 || created.ExpiresAt != nil {
		t.Fatalf("keys create --json = %d %s (%v)", code, out, err)
	}
	code, out, _ = keysRun(dbURL, "list", "--org", org)
	secret := token[len("sdk_")+32+1+8+1:] // the secret may hold "_"
	if code != 0 || !strings.Contains(out, "runtime eu-1") || !strings.Contains(out, created.Prefix) || strings.Contains(out, secret) {
		t.Errorf("keys list = %d:\n%s\nwant both keys, no secret", code, out)
	}
	code, out, _ = keysRun(dbURL, "revoke", "--org", org, "--id", created.ID.String())
	if code != 0 || !strings.Contains(out, "revoked: service key "+created.Prefix) || !strings.Contains(out, "by olga") {
		t.Errorf("keys revoke = %d %q", code, out)
	}
	code, out, _ = keysRun(dbURL, "list", "--org", org, "--json")
	var listed []servicekeys.Key
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed) != 2 || listed[0].RevokedAt == nil || listed[1].RevokedAt != nil {
		t.Errorf("keys list --json = %d %s (%v), want the backend key revoked, newest first", code, out, err)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"create", "--org", org, "--name", "n", "--scope", "admin"}, 2, "--scope: \"admin\" is not a scope"},
		{[]string{"create", "--org", org, "--scope", "read"}, 2, "--name: is required"},
		{[]string{"create", "--name", "n", "--scope", "read"}, 2, "--org: is required"},
		{[]string{"revoke", "--org", org, "--id", uuid.NewString()}, 1, "no service key"},
		{[]string{"revoke", "--org", uuid.NewString(), "--id", created.ID.String()}, 1, "no service key"},
		{[]string{"rotate"}, 2, "unknown subcommand"},
	} {
		code, _, errOut := keysRun(dbURL, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("keys %v = %d %q, want %d naming %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

// TestServeTakesServiceKeys: a runtime reports a Run's status with a
// runs:report key made by `searchd keys create`, and a backend starts and
// reads Runs with a starts:write,read key; neither opens the other's
// routes, and the admin lists both through the API.
func TestServeTakesServiceKeys(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDBURL(t)
	_, base, _ := startServe(t, map[string]string{
		"DATABASE_URL": dbURL, "SEARCHD_JWT_SECRET": goodSecret, "SEARCHD_ADDR": "127.0.0.1:0", "SEARCHD_SWEEP_INTERVAL": "0s",
	})
	org := uuid.NewString()
	_, runtimeKey, _ := keysRun(dbURL, "create", "--org", org, "--name", "runtime", "--scope", "runs:report")
	_, backendKey, _ := keysRun(dbURL, "create", "--org", org, "--name", "backend", "--scope", "starts:write", "--scope", "read")
	runtimeKey, backendKey = strings.TrimSpace(runtimeKey), strings.TrimSpace(backendKey)
	run := postRun(t, base, backendKey, "serve-keys")
	var got struct {
		Status    string `json:"status"`
		CreatedBy string `json:"created_by"`
	}
	getJSON(t, base+"/v1/runs/"+run, backendKey, &got)
	if !strings.HasPrefix(got.CreatedBy, "key:") {
		t.Errorf("the Run's created_by = %q, want the key's key:<prefix>", got.CreatedBy)
	}
	report := func(tok string) int {
		req, _ := http.NewRequest(http.MethodPut, base+"/v1/runs/"+run+"/status", strings.NewReader(`{"status":"running"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := report(backendKey); code != http.StatusForbidden {
		t.Errorf("the backend key's status report = %d, want 403", code)
	}
	if code := report(runtimeKey); code != http.StatusOK {
		t.Errorf("the runtime key's status report = %d, want 200", code)
	}
	getJSON(t, base+"/v1/runs/"+run, backendKey, &got)
	if got.Status != "running" {
		t.Errorf("the Run after the report = %+v, want running", got)
	}
	admin, _ := auth.SignAdminToken([]byte(goodSecret), uuid.MustParse(org), "ada", time.Now(), time.Hour)
	var page struct {
		Items []servicekeys.Key `json:"items"`
	}
	getJSON(t, base+"/v1/service-keys", admin, &page)
	if len(page.Items) != 2 {
		t.Errorf("the admin's list = %+v, want both keys", page.Items)
	}
}
