package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/savedsearch"
)

// listPage is a page of an API list as these tests read it.
type listPage struct {
	Items []struct {
		ID string `json:"id"`
	} `json:"items"`
	NextCursor *string `json:"next_cursor"`
	Code       string  `json:"code"`
}

// getPage gets url with tok and returns the status and the page (or
// problem) it answered.
func getPage(t *testing.T, url, tok string) (int, listPage) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p listPage
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res.StatusCode, p
}

// TestServersOnOneDatabaseShareTheCursorKey: two serve processes on one
// database (two replicas) read the cursor key from it, so the cursor one
// minted pages on at the other. The key is the database's, not the
// process's: once the row's secret is replaced, a server started after
// refuses the cursor (400 validation_failed), while the first, which read
// the key once at startup, still takes it.
func TestServersOnOneDatabaseShareTheCursorKey(t *testing.T) {
	t.Parallel()
	dbURL, pool := newDB(t)
	ctx := context.Background()
	org := uuid.New()
	for _, name := range []string{"older", "newer"} {
		if _, err := savedsearch.NewStore(pool).Create(ctx, org, savedsearch.CreateParams{
			Name: name, Brief: savedsearch.Brief{Query: "postgres"}}); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"DATABASE_URL": dbURL, "SEARCHD_JWT_SECRET": goodSecret, "SEARCHD_ADDR": "127.0.0.1:0"}
	serve := func() string {
		addr, _ := newHarness(env).start(t, "serve")
		return "http://" + addr + "/v1/saved-searches?"
	}
	a, b := serve(), serve()
	tok, err := auth.SignToken([]byte(goodSecret), org, "replicas", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	status, first := getPage(t, a+"limit=1", tok)
	if status != http.StatusOK || len(first.Items) != 1 || first.NextCursor == nil {
		t.Fatalf("A's first page = %d %+v, want one item and a next page", status, first)
	}
	next := url.Values{"limit": {"1"}, "cursor": {*first.NextCursor}}.Encode()
	status, second := getPage(t, b+next, tok)
	if status != http.StatusOK || len(second.Items) != 1 || second.Items[0].ID == first.Items[0].ID {
		t.Fatalf("B's page after A's cursor = %d %+v, want 200 with the other saved search", status, second)
	}

	if _, err := pool.Exec(ctx, `UPDATE agent.cursor_key SET secret = sha256(uuid_send(gen_random_uuid()))`); err != nil {
		t.Fatal(err)
	}
	if status, p := getPage(t, serve()+next, tok); status != http.StatusBadRequest || p.Code != "validation_failed" {
		t.Errorf("a server started on the new key answers A's cursor %d %+v, want 400 validation_failed", status, p)
	}
	if status, _ := getPage(t, a+next, tok); status != http.StatusOK {
		t.Errorf("A, which read the key at startup, answers its own cursor %d, want 200", status)
	}
}
