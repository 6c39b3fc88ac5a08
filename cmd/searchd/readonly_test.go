package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// TestReadOnlyDatabaseAnswers503AndThePoolReconnects serves the API on the
// pool serve opens, against a database that refuses writes as a demoted
// primary or a standby does (every session read-only, SQLSTATE 25006 on a
// write). A write answers 503 unavailable, never 500, and the pool keeps
// no connection that answered so; once the database takes writes again
// (the new primary), the next write on the same pool succeeds without a
// restart. A pool that kept the read-only connection would fail that write
// too: the session stays read-only for its life.
func TestReadOnlyDatabaseAnswers503AndThePoolReconnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDBURL(t)
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var db string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	alter := func(setting string) {
		t.Helper()
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" "+setting); err != nil {
			t.Fatal(err)
		}
	}
	alter("SET default_transaction_read_only = on")

	cfg := serveConfig(t, map[string]string{"DATABASE_URL": dbURL, "SEARCHD_JWT_SECRET": goodSecret, "SEARCHD_DB_MAX_CONNS": "2"})
	pool, err := openPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ts := serveAPI(t, pool, cfg)
	token, err := auth.SignToken([]byte(goodSecret), uuid.New(), "tester", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	create := func() (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/saved-searches",
			strings.NewReader(`{"name":"n","brief":{"query":"q"}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body), res.Header
	}

	for i := range 3 {
		status, body, h := create()
		var p struct{ Code string }
		_ = json.Unmarshal([]byte(body), &p)
		if status != http.StatusServiceUnavailable || p.Code != api.CodeUnavailable || h.Get("Retry-After") == "" {
			t.Fatalf("create %d on a read-only database = %d %s, want 503 unavailable with Retry-After", i, status, body)
		}
		// The pool destroys a closed connection in the background.
		for deadline := time.Now().Add(10 * time.Second); pool.Stat().TotalConns() != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after create %d the pool holds %d connections, want the read-only one dropped", i, pool.Stat().TotalConns())
			}
		}
	}

	alter("RESET default_transaction_read_only")
	if status, body, _ := create(); status != http.StatusCreated {
		t.Fatalf("create once the database takes writes = %d %s, want 201 on a new connection", status, body)
	}
}
