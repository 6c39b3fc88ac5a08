package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/savedsearch"
)

// TestServeRunsEveryStoreAtTheAppsDatabaseClock: serve builds its stores
// once, all at the app's one database clock. With that clock stubbed two
// days ahead of the database's, a saved-search start through the API
// stamps its claim and its Run with the stub's time: the plane and the Run
// store the starter was handed are the ones built at it.
func TestServeRunsEveryStoreAtTheAppsDatabaseClock(t *testing.T) {
	t.Parallel()
	dbURL, pool := newDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	org := uuid.New()
	ss, err := savedsearch.NewStore(pool).Create(ctx, org, savedsearch.CreateParams{
		Name: "one clock", Brief: savedsearch.Brief{Query: "postgres"}})
	if err != nil {
		t.Fatal(err)
	}

	h := newHarness(map[string]string{
		"DATABASE_URL":       dbURL,
		"SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_ADDR":       "127.0.0.1:0",
	})
	clk := dbclocktest.New(time.Now().Add(48 * time.Hour).UTC().Truncate(time.Microsecond))
	h.app.dbClock = clk.Clock()
	addr, _ := h.start(t, "serve")

	tok, err := auth.SignToken([]byte(goodSecret), org, "clock-test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	res := post(t, "http://"+addr+"/v1/saved-searches/"+ss.ID.String()+"/start", tok, "one-clock", `{}`)
	defer res.Body.Close()
	var body struct {
		Run struct {
			CreatedAt time.Time `json:"created_at"`
		} `json:"run"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("start = %d, %v; want 201 with a Run", res.StatusCode, err)
	}
	at := clk.Now()
	if !body.Run.CreatedAt.Equal(at) {
		t.Errorf("the Run's created_at is %v, want the app clock's %v", body.Run.CreatedAt, at)
	}
	rec, err := idempotency.NewRepository(pool, nil).Get(ctx, org, idempotency.ScopeSavedSearchStart, "one-clock")
	if err != nil || rec == nil {
		t.Fatalf("the start's claim = %v, %v; want it stored", rec, err)
	}
	if !rec.ClaimedAt.Equal(at) {
		t.Errorf("the claim's claimed_at is %v, want the app clock's %v", rec.ClaimedAt, at)
	}
}
