package console_test

import (
	"bytes"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/servicekeys"
)

var tokenShown = regexp.MustCompile(`sdk_[0-9a-f]{32}_[a-z2-7]{8}_[A-Za-z0-9_-]{43}`)

// TestServiceKeysPageCreatesShowsOnceAndRevokes: an organization's admin
// creates a key on the page and sees its token once (not stored by the
// browser, never logged, never listed again), and revokes it; a member
// without the admin role is refused the page and its forms.
func TestServiceKeysPageCreatesShowsOnceAndRevokes(t *testing.T) {
	t.Parallel()
	pool, w := seeded(t)
	var log bytes.Buffer
	b := &bundle{pool: pool, world: w, log: &log, handler: newConsoleAt(t, pool, &log, 0, nil, func(d *console.Deps) {
		d.ServiceKeys = servicekeys.NewStore(pool, nil)
	})}
	member := b.signIn(t, w.OrgA, "alice")
	if rec := b.do("GET", "/console/service-keys", member, nil, nil); rec.Code != http.StatusForbidden {
		t.Errorf("a member's GET = %d, want 403", rec.Code)
	}
	if rec := b.do("GET", "/console/saved-searches", member, nil, nil); strings.Contains(rec.Body.String(), "/console/service-keys") {
		t.Errorf("a member's navigation links the service keys page")
	}
	tok, err := auth.SignAdminToken(secret, w.OrgA, "ada", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	admin := b.signInWith(t, tok)
	csrf := b.csrfOf(t, admin, "/console/service-keys")
	rec := b.do("POST", "/console/service-keys", admin, url.Values{"csrf": {csrf}, "name": {"runtime eu-1"},
		"scope": {"runs:report"}, "expires_days": {"30"}}, nil)
	shown := tokenShown.FindString(rec.Body.String())
	if rec.Code != http.StatusCreated || shown == "" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("create = %d (Cache-Control %q), token %q, want 201 no-store showing the token", rec.Code, rec.Header().Get("Cache-Control"), shown)
	}
	page := b.do("GET", "/console/service-keys", admin, nil, nil).Body.String()
	if !strings.Contains(page, "runtime eu-1") || tokenShown.MatchString(page) || strings.Contains(log.String(), shown[46:]) {
		t.Errorf("after the create: the list lacks the key, or the token is listed or logged")
	}
	if rec := b.do("POST", "/console/service-keys", admin, url.Values{"csrf": {csrf}, "name": {"n"}, "scope": {"admin"}}, nil); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "No key was created") {
		t.Errorf("create with an unknown scope = %d, want 400 saying no key was created", rec.Code)
	}
	if rec := b.do("POST", "/console/service-keys", member, url.Values{"csrf": {csrf}, "name": {"n"}, "scope": {"read"}}, nil); rec.Code != http.StatusForbidden {
		t.Errorf("a member's create = %d, want 403", rec.Code)
	}
	id := regexp.MustCompile(`/console/service-keys/([0-9a-f-]{36})/revoke`).FindStringSubmatch(page)
	if id == nil {
		t.Fatal("the page has no revoke form")
	}
	rec = b.do("POST", "/console/service-keys/"+id[1]+"/revoke", admin, url.Values{"csrf": {csrf}}, nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("revoke = %d, want 303", rec.Code)
	}
	page = b.do("GET", rec.Header().Get("Location"), admin, nil, nil).Body.String()
	if !strings.Contains(page, "the key is revoked") || !strings.Contains(page, "by ada") || strings.Contains(page, "/revoke") {
		t.Errorf("after the revoke the page does not show it revoked by ada:\n%s", page)
	}
	// Another organization's admin cannot revoke it.
	other, _ := auth.SignAdminToken(secret, w.OrgB, "eve", time.Now(), time.Hour)
	eve := b.signInWith(t, other)
	rec = b.do("POST", "/console/service-keys/"+id[1]+"/revoke", eve, url.Values{"csrf": {b.csrfOf(t, eve, "/console/service-keys")}}, nil)
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || !strings.Contains(loc, "revoked=gone") {
		t.Errorf("another organization's admin revoking = %d to %q, want gone", rec.Code, loc)
	}
}
