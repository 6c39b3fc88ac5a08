package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/snapshot"
)

type plainRun runs.Run

// libraryRun is a Run as encoding/json writes it by reflection, with the
// two fields Run.MarshalJSON adds.
type libraryRun struct {
	plainRun
	CreatedBy      *string `json:"created_by"`
	IdempotencyKey string  `json:"idempotency_key"`
}

func benchResult() admission.Result {
	at := time.Date(2026, 12, 7, 5, 30, 0, 123456789, time.UTC)
	ss, snap, actor := uuid.New(), uuid.New(), "bench-actor"
	run := &runs.Run{ID: uuid.New(), OrganizationID: uuid.New(), Kind: runs.KindSavedSearch, SavedSearchID: &ss,
		SnapshotID: &snap, Status: "queued", Options: json.RawMessage(`{"max_results":50,"note":""}`), CreatedAt: at,
		RetainUntil: at.Add(30 * 24 * time.Hour), Version: 1, UpdatedAt: at, CreatedBy: &actor,
		StartKey: runs.SavedSearchStartKey("0193a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b")}
	sum := &snapshot.Summary{ID: snap, SavedSearchID: ss, SavedSearchVersion: 1,
		ContentHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", CreatedAt: at}
	return admission.Result{Run: run, Snapshot: sum, Created: true}
}

// BenchmarkStartAnswer: a start's answer written by startAnswer (the
// hand-tuned writers and the buffer pool) against c.JSON of the same
// document by reflection; both into a recorder, as the server does.
func BenchmarkStartAnswer(b *testing.B) {
	e := echo.New()
	res := benchResult()
	lib := struct {
		Run      *libraryRun       `json:"run"`
		Snapshot *snapshot.Summary `json:"snapshot"`
	}{&libraryRun{plainRun(*res.Run), res.Run.CreatedBy, res.Run.IdempotencyKey()}, res.Snapshot}
	req := httptest.NewRequest(http.MethodPost, "/v1/saved-searches/x/start", nil)
	var hand, library []byte
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			if err := startAnswer(e.NewContext(req, rec), res); err != nil {
				b.Fatal(err)
			}
			hand = rec.Body.Bytes()
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			c := e.NewContext(req, rec)
			c.Response().Header().Set(echo.HeaderLocation, "/v1/runs/"+res.Run.ID.String())
			if err := c.JSON(http.StatusCreated, lib); err != nil {
				b.Fatal(err)
			}
			library = rec.Body.Bytes()
		}
	})
	if string(hand) != string(library) {
		b.Fatalf("answers differ:\n%s\n%s", hand, library)
	}
}

// BenchmarkRunRead: GET /v1/runs/{id}'s body, runWithDispatch against
// the same by reflection (a Run not yet dispatched).
func BenchmarkRunRead(b *testing.B) {
	run := benchResult().Run
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := runWithDispatch(run, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(struct {
				*libraryRun
				Dispatch any `json:"dispatch"`
			}{&libraryRun{plainRun(*run), run.CreatedBy, run.IdempotencyKey()}, nil}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHasRules: decodeBody's check of a start's body, skipped by
// hasRules against the validator's walk of it.
func BenchmarkHasRules(b *testing.B) {
	n := 50
	body := &startRequest{MaxResults: &n}
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if hasRules(reflect.TypeOf(body)) {
				b.Fatal("rules")
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := validate.Struct(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
