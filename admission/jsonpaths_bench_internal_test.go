package admission

import (
	"testing"

	"github.com/google/uuid"
)

func BenchmarkSavedSearchRequestHash(b *testing.B) {
	id, o := uuid.New(), StartOptions{MaxResults: 50}
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = SavedSearchRequestHash(id, o)
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = hashDoc(savedSearchHashDomain, canonicalSavedSearchRequest(id, o.Normalize()))
		}
	})
}

// BenchmarkStartOptionsValid: a start checks its options twice
// (NewStartOptions, then the starter's validate); one check each here.
func BenchmarkStartOptionsValid(b *testing.B) {
	maxResults, note := 50, ""
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !(StartOptions{MaxResults: maxResults, Note: note}).valid() {
				b.Fatal("refused")
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := check(optionRules{MaxResults: &maxResults, Note: &note}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
