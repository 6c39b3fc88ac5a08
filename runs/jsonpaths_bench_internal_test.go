package runs

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
)

func benchRun() Run {
	at := time.Date(2026, 12, 7, 5, 30, 0, 123456789, time.UTC)
	ss, snap, actor := uuid.New(), uuid.New(), "bench-actor"
	return Run{ID: uuid.New(), OrganizationID: uuid.New(), Kind: KindSavedSearch, SavedSearchID: &ss, SnapshotID: &snap,
		Status: "queued", Options: json.RawMessage(`{"max_results":50,"note":""}`), CreatedAt: at,
		RetainUntil: at.Add(30 * 24 * time.Hour), Version: 1, UpdatedAt: at, CreatedBy: &actor,
		StartKey: savedSearchPrefix + "0193a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b"}
}

func BenchmarkRunJSON(b *testing.B) {
	r := benchRun()
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.AppendJSON(make([]byte, 0, 1024)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reflectiveJSON(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
