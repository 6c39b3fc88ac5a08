package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/webhooks"
)

// TestWebhooksPageShowsEndpointsDeliveriesAndAttempts: the page lists
// the organization's endpoints, each delivery with every attempt's
// status and answer, never a secret; another organization sees none of
// it.
func TestWebhooksPageShowsEndpointsDeliveriesAndAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "receiver overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	store := webhooks.NewStore(b.pool, webhooks.Config{AllowHTTPLoopback: true})
	ep, err := store.Create(ctx, b.world.OrgA, webhooks.CreateParams{URL: srv.URL + "/hooks", Description: "product UI", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	name := "enrich"
	run, _, err := runs.NewStore(b.pool, runs.Config{}).Admit(ctx, runs.AdmitParams{OrganizationID: b.world.OrgA,
		Kind: runs.KindCapability, StartKey: runs.DirectStartKey(uuid.NewString()), RequestHash: "h", Name: &name,
		Input: json.RawMessage(`{}`), Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := webhooks.NewWorker(store, webhooks.WorkerConfig{})
	l, err := store.LeasePass(ctx, 10, time.Minute)
	if err != nil || len(l) != 1 {
		t.Fatalf("lease = %v, %v", l, err)
	}
	w.Deliver(ctx, l[0])

	body := b.do("GET", "/console/webhooks", b.signIn(t, b.world.OrgA, "alice"), nil, nil).Body.String()
	for _, want := range []string{srv.URL + "/hooks", "product UI", "run.admitted", "503", "receiver overloaded",
		"1 attempt", run.ID.String(), "failing since"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	if strings.Contains(body, ep.Secret) || strings.Contains(body, "whsec_") {
		t.Error("the page shows a secret")
	}
	other := b.do("GET", "/console/webhooks", b.signIn(t, b.world.OrgB, "eve"), nil, nil)
	if other.Code != http.StatusOK || strings.Contains(other.Body.String(), srv.URL) || strings.Contains(other.Body.String(), run.ID.String()) {
		t.Errorf("org B's page = %d and shows org A's endpoint", other.Code)
	}
}

// TestWebhooksPageManagesEndpointsForAdminsOnly: an organization's admin
// creates an endpoint on the page and sees its secret once (not stored by
// the browser, never listed again), disables it (recorded as hers),
// enables and deletes it (only with the box ticked); refused input is a
// 400 saying why with nothing written; an operator naming the
// organization manages them too; a member sees no form and her posts are
// refused; another organization's admin reaches none of it.
func TestWebhooksPageManagesEndpointsForAdminsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	store := webhooks.NewStore(b.pool, webhooks.Config{})
	count := func() int {
		t.Helper()
		l, err := store.List(ctx, b.world.OrgA)
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	adminTok, _ := auth.SignAdminToken(secret, b.world.OrgA, "ada", time.Now(), time.Hour)
	admin := b.signInWith(t, adminTok)
	csrf := b.csrfOf(t, admin, "/console/webhooks")
	if page := b.do("GET", "/console/webhooks", admin, nil, nil).Body.String(); !strings.Contains(page, `action="/console/webhooks"`) {
		t.Fatal("an admin's page has no create form")
	}

	// Refused input: a 400 naming the field, the form kept, nothing created.
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"url": {"http://hooks.example.com/a"}}, "url must be https"},
		{url.Values{"url": {"https://hooks.example.com/a"}, "event_type": {"run.exploded"}}, "event_types must name only"},
		{url.Values{"url": {"https://hooks.example.com/a"}, "description": {strings.Repeat("d", 501)}}, "description must be at most 500"},
	} {
		c.form.Set("csrf", csrf)
		rec := b.do("POST", "/console/webhooks", admin, c.form, nil)
		if body := rec.Body.String(); rec.Code != http.StatusBadRequest || !strings.Contains(body, "No endpoint was created: "+c.want) ||
			!strings.Contains(body, `value="`+c.form.Get("url")+`"`) {
			t.Errorf("create %v = %d, want 400 saying %q with the URL kept", c.form, rec.Code, c.want)
		}
	}
	if rec := b.do("POST", "/console/webhooks", admin, url.Values{"url": {"https://hooks.example.com/a"}}, nil); rec.Code != http.StatusForbidden {
		t.Errorf("a create without the CSRF token = %d, want 403", rec.Code)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d endpoints after refused creates, want 0", n)
	}

	rec := b.do("POST", "/console/webhooks", admin, url.Values{"csrf": {csrf}, "url": {"https://hooks.example.com/searchd"},
		"description": {"product UI"}, "event_type": {"run.succeeded", "run.failed"}}, nil)
	shown := regexp.MustCompile(`whsec_[A-Za-z0-9+/=]{44}`).FindString(html.UnescapeString(rec.Body.String()))
	if rec.Code != http.StatusCreated || shown == "" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("create = %d (Cache-Control %q), secret %q, want 201 no-store showing the secret", rec.Code, rec.Header().Get("Cache-Control"), shown)
	}
	list, err := store.List(ctx, b.world.OrgA)
	if err != nil || len(list) != 1 {
		t.Fatalf("endpoints = %v, %v, want the one created", list, err)
	}
	ep := list[0]
	if got, _ := store.Get(ctx, b.world.OrgA, ep.ID); got.Secret != shown || ep.CreatedBy != "ada" || ep.Description != "product UI" ||
		strings.Join(ep.EventTypes, ",") != "run.failed,run.succeeded" {
		t.Errorf("stored %+v (secret shown %v), want ada's with its description, types and the secret shown", ep, got.Secret == shown)
	}
	if page := b.do("GET", "/console/webhooks", admin, nil, nil).Body.String(); strings.Contains(page, "whsec_") || !strings.Contains(page, "https://hooks.example.com/searchd") {
		t.Error("after the create the page shows the secret again, or not the endpoint")
	}

	// A member reads the page without any form, and cannot post one.
	member := b.signIn(t, b.world.OrgA, "alice")
	page := b.do("GET", "/console/webhooks", member, nil, nil).Body.String()
	if !strings.Contains(page, "https://hooks.example.com/searchd") || strings.Contains(page, "/console/webhooks/") ||
		strings.Contains(page, `action="/console/webhooks"`) {
		t.Error("a member's page lacks the endpoint or shows a form")
	}
	mcsrf := b.csrfOf(t, member, "/console/webhooks")
	for _, p := range []struct {
		path string
		form url.Values
	}{
		{"/console/webhooks", url.Values{"url": {"https://hooks.example.com/m"}}},
		{"/console/webhooks/" + ep.ID.String() + "/state", url.Values{"state": {"disabled"}}},
		{"/console/webhooks/" + ep.ID.String() + "/delete", url.Values{"confirm": {"yes"}}},
	} {
		p.form.Set("csrf", mcsrf)
		if rec := b.do("POST", p.path, member, p.form, nil); rec.Code != http.StatusForbidden {
			t.Errorf("a member's POST %s = %d, want 403", p.path, rec.Code)
		}
	}
	if got, _ := store.Get(ctx, b.world.OrgA, ep.ID); count() != 1 || got.State != webhooks.StateEnabled {
		t.Fatal("a member's posts changed the endpoints")
	}

	// Another organization's admin reaches none of it.
	eveTok, _ := auth.SignAdminToken(secret, b.world.OrgB, "eve", time.Now(), time.Hour)
	eve := b.signInWith(t, eveTok)
	ecsrf := b.csrfOf(t, eve, "/console/webhooks")
	for _, p := range []string{"/state", "/delete"} {
		rec := b.do("POST", "/console/webhooks/"+ep.ID.String()+p, eve, url.Values{"csrf": {ecsrf}, "state": {"disabled"}, "confirm": {"yes"}}, nil)
		if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || !strings.Contains(loc, "changed=gone") {
			t.Errorf("another organization's admin POST %s = %d to %q, want gone", p, rec.Code, loc)
		}
	}

	// Disable, a state the store refuses, enable.
	state := "/console/webhooks/" + ep.ID.String() + "/state"
	rec = b.do("POST", state, admin, url.Values{"csrf": {csrf}, "state": {"disabled"}}, nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("disable = %d, want 303", rec.Code)
	}
	page = b.do("GET", rec.Header().Get("Location"), admin, nil, nil).Body.String()
	if !strings.Contains(page, "the endpoint is disabled") || !strings.Contains(page, "disabled: disabled by ada") || !strings.Contains(page, ">Enable<") {
		t.Errorf("after the disable the page does not show it disabled by ada with an Enable button")
	}
	rec = b.do("POST", state, admin, url.Values{"csrf": {csrf}, "state": {"paused"}}, nil)
	if got, _ := store.Get(ctx, b.world.OrgA, ep.ID); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "Nothing was changed: state must be enabled or disabled") || got.State != webhooks.StateDisabled {
		t.Errorf("state paused = %d, endpoint %s, want 400 saying why and the endpoint left disabled", rec.Code, got.State)
	}
	if rec := b.do("POST", state, admin, url.Values{"csrf": {csrf}, "state": {"enabled"}}, nil); rec.Code != http.StatusSeeOther {
		t.Errorf("enable = %d, want 303", rec.Code)
	}
	if got, _ := store.Get(ctx, b.world.OrgA, ep.ID); got.State != webhooks.StateEnabled || got.DisabledReason != nil {
		t.Errorf("after the enable: %s (%v), want enabled", got.State, got.DisabledReason)
	}

	// Delete: refused without the box ticked, then done.
	del := "/console/webhooks/" + ep.ID.String() + "/delete"
	if rec := b.do("POST", del, admin, url.Values{"csrf": {csrf}}, nil); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "Nothing was deleted: confirm must be ticked") || count() != 1 {
		t.Errorf("an unconfirmed delete = %d, want 400 saying why, the endpoint kept", rec.Code)
	}
	rec = b.do("POST", del, admin, url.Values{"csrf": {csrf}, "confirm": {"yes"}}, nil)
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || !strings.Contains(loc, "changed=deleted") || count() != 0 {
		t.Errorf("delete = %d to %q with %d endpoints left, want 303 deleted and none", rec.Code, loc, count())
	}

	// An operator naming the organization manages them too.
	opTok, _ := auth.SignOperatorToken(secret, b.world.OrgA, "omar", time.Now(), time.Hour)
	op := b.signInWith(t, opTok)
	rec = b.do("POST", "/console/webhooks", op, url.Values{"csrf": {b.csrfOf(t, op, "/console/webhooks")}, "url": {"https://hooks.example.com/op"}}, nil)
	if rec.Code != http.StatusCreated || !strings.Contains(rec.Body.String(), "whsec_") {
		t.Errorf("an operator's create = %d, want 201 with the secret", rec.Code)
	}
}
