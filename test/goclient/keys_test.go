package goclient_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/client"
)

// TestKeysArriveAsGiven holds the client's Idempotency-Key header to the
// server's own parser: every key, quotes and commas included, is read back
// as the key the caller gave.
func TestKeysArriveAsGiven(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sent []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"run":{"id":"8c0b9a8e-7b2c-4d0f-9d38-3f6d2f1f2a11","kind":"capability","status":"queued"},"snapshot":null}`)
	}))
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL, client.Options{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{`plain`, `"quoted" start`, `"`, `\"\\`, `in "the" middle`, `"` + strings.Repeat("x", 254),
		`a1, a2`, `,`, `"a", "b"`}
	for _, key := range keys {
		if _, err := c.StartRun(t.Context(), client.DirectStart{Kind: client.KindCapability, Name: "x"}, client.WithIdempotencyKey(key)); err != nil {
			t.Fatalf("StartRun(key %q): %v", key, err)
		}
	}
	if len(sent) != len(keys) {
		t.Fatalf("the server saw %d starts, want %d", len(sent), len(keys))
	}
	for i, key := range sent {
		if got, err := api.ParseIdempotencyKey(key); err != nil || got != keys[i] {
			t.Errorf("key %q sent as %q, which the server reads as %q (%v)", keys[i], key, got, err)
		}
	}
}
