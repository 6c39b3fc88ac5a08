// Package ids mints the server's primary keys: time-ordered UUIDs
// (version 7, RFC 9562), so that a new row's key lands at the right edge
// of its primary-key index instead of on a random page of it. With random
// keys (version 4) every insert into a table larger than memory reads an
// index page from disk and, after each checkpoint, writes a full-page
// image of it to the WAL; with time-ordered keys the inserts share the few
// hot pages at the right edge (docs/benchmarks.md, "A large database").
//
// Only primary keys are minted here. Secrets and fences stay random
// (uuid.New or crypto/rand): a lease token, a session's secret, a drain's
// token must not be guessable from the time they were made, and a
// version 7 UUID gives away its millisecond and has 74 random bits, not 122.
package ids

import (
	"sync/atomic"

	"github.com/google/uuid"
)

// random makes New mint version 4 UUIDs; see [Random].
var random atomic.Bool

// New returns a new primary key: a version 7 UUID, ordered by the
// millisecond it was made (and, within one process, by a sequence within
// the millisecond).
//
// It panics when the system's random source fails, as uuid.New does:
// crypto/rand's reader does not fail on the platforms Go supports (since
// Go 1.24 it crashes the program rather than return an error), so the
// error uuid.NewV7 returns can only be such a failure, and no caller could
// do better than stop.
func New() uuid.UUID {
	if random.Load() {
		return uuid.New()
	}
	return uuid.Must(uuid.NewV7())
}

// Random makes [New] mint random (version 4) UUIDs, as every key was
// minted before this package, while on is true. It is for the scale benchmark
// (bench/http -scale -ids v4), which measures what the ordering saves; it
// affects the whole process.
func Random(on bool) { random.Store(on) }
