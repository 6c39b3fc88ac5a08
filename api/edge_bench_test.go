package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/snapshot"
)

// replayingStarter answers every saved-search start as a replay of one
// stored Run: what the edge does around a replay, without the database.
type replayingStarter struct{ res admission.Result }

func (r replayingStarter) StartSavedSearch(context.Context, admission.SavedSearchStart) (admission.Result, error) {
	return r.res, nil
}

func (r replayingStarter) StartDirect(context.Context, admission.DirectStart) (admission.Result, error) {
	return r.res, nil
}

// BenchmarkTheEdgeOfAReplay measures the Go the API spends around a
// replay (middleware, body, answer) with the database taken out: the
// starter answers at once. The JSON access log is formatted and
// discarded, as bench/http's real server does. Its ns/op and allocs/op
// are what the HTTP ratio of issue 17 loses to the thin handler beyond
// the statement both run.
func BenchmarkTheEdgeOfAReplay(b *testing.B) {
	at := time.Date(2026, 12, 1, 13, 0, 0, 123456000, time.UTC)
	ss, snap, name, actor := uuid.New(), uuid.New(), "weekly leads", "alice"
	run := &runs.Run{ID: uuid.New(), OrganizationID: uuid.New(), Kind: runs.KindSavedSearch, SavedSearchID: &ss,
		SnapshotID: &snap, Name: &name, Status: runs.StatusQueued, Options: json.RawMessage(`{"max_results": 50}`),
		CreatedAt: at, RetainUntil: at.Add(runs.Retention), StartKey: runs.SavedSearchStartKey("k"), CreatedBy: &actor}
	res := admission.Result{Run: run, Snapshot: &snapshot.Summary{ID: snap, SavedSearchID: ss, SavedSearchVersion: 3,
		ContentHash: strings.Repeat("ab", 32), CreatedAt: at}}
	d := fakeDeps(b, replayingStarter{res})
	d.Logger = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := api.New(d)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := auth.SignToken(testSecret, uuid.New(), "bench", time.Now(), 24*time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	path := "/v1/saved-searches/" + ss.String() + "/start"
	body := `{"max_results":50}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set(api.HeaderIdempotencyKey, "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("replay = %d %s", w.Code, w.Body)
		}
	}
}
