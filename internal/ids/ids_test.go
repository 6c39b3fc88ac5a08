package ids

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
)

func TestNewMintsTimeOrderedVersion7Keys(t *testing.T) {
	prev := New()
	for range 10000 {
		id := New()
		if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
			t.Fatalf("New() = %s, version %d variant %s, want version 7 RFC 4122", id, id.Version(), id.Variant())
		}
		// Ordered as bytes, which is how PostgreSQL's uuid type orders
		// them, and so how a btree index on them does.
		if bytes.Compare(prev[:], id[:]) >= 0 {
			t.Fatalf("New() = %s after %s, want it greater", id, prev)
		}
		prev = id
	}
}

func TestRandomMintsVersion4KeysUntilTurnedOff(t *testing.T) {
	Random(true)
	id := New()
	Random(false)
	if id.Version() != 4 {
		t.Fatalf("New() with Random(true) = %s, version %d, want 4", id, id.Version())
	}
	if id := New(); id.Version() != 7 {
		t.Fatalf("New() after Random(false) = %s, version %d, want 7", id, id.Version())
	}
}
