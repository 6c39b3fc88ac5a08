// Package ids mints primary keys as time-ordered version 7 UUIDs, so
// inserts land at the right edge of the index instead of on random pages
// (see docs/benchmarks.md, "A large database"). Secrets and fences (lease
// tokens, session secrets) stay random: a version 7 UUID reveals its
// millisecond and has only 74 random bits.
package ids

import (
	"sync/atomic"

	"github.com/google/uuid"
)

// random makes New mint version 4 UUIDs; see [Random].
var random atomic.Bool

// New returns a new version 7 UUID. It panics if the system's random
// source fails, which crypto/rand never reports since Go 1.24.
func New() uuid.UUID {
	if random.Load() {
		return uuid.New()
	}
	return uuid.Must(uuid.NewV7())
}

// Random makes [New] mint version 4 UUIDs while on, process-wide. It is
// for the scale benchmark (bench/http -scale -ids v4).
func Random(on bool) { random.Store(on) }
