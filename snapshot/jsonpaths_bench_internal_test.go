package snapshot

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
)

func BenchmarkSummaryJSON(b *testing.B) {
	s := Summary{ID: uuid.New(), SavedSearchID: uuid.New(), SavedSearchVersion: 1,
		ContentHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		CreatedAt:   time.Date(2026, 12, 7, 5, 30, 0, 123456789, time.UTC)}
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.AppendJSON(make([]byte, 0, 256)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
