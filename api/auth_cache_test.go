package api_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
)

// A verified token is remembered, but its expiry is checked on every
// request: a remembered token is refused the moment it expires.
func TestRememberedTokenStillExpires(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64 // how far the server's clock is ahead of real time
	b := setup(t, setupOpts{deps: func(d *api.Deps) {
		d.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	}})
	get := func(token string) int {
		return b.do(req{method: "GET", path: "/v1/saved-searches", header: bearer(token)}).status
	}
	if s := get(b.token); s != http.StatusOK {
		t.Fatalf("fresh token: %d, want 200", s)
	}
	if s := get(b.token); s != http.StatusOK {
		t.Fatalf("remembered token: %d, want 200", s)
	}
	offset.Store(int64(time.Hour + time.Minute)) // past the token's 1 h
	if s := get(b.token); s != http.StatusUnauthorized {
		t.Fatalf("remembered token after its expiry: %d, want 401", s)
	}
	// A token of another organization is its own entry: it never answers
	// as the first one.
	offset.Store(0)
	other := b.tokenFor(uuid.New(), "other")
	ss := b.seedSavedSearch(seedOpts{})
	path := "/v1/saved-searches/" + ss.ID.String()
	if s := b.do(req{method: "GET", path: path}).status; s != http.StatusOK {
		t.Fatalf("owner: %d, want 200", s)
	}
	if s := b.do(req{method: "GET", path: path, header: bearer(other)}).status; s != http.StatusNotFound {
		t.Fatalf("another organization's token: %d, want 404", s)
	}
	// Tampering with a remembered token's signature is a new string that
	// must verify on its own, and does not.
	forged := b.token[:len(b.token)-2] + "xx"
	if s := get(forged); s != http.StatusUnauthorized {
		t.Fatalf("forged token: %d, want 401", s)
	}
}
