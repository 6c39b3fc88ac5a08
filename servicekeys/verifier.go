package servicekeys

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/internal/dberr"
)

// RevocationBound is the longest a replica keeps accepting a key after it
// was revoked, or after it expired: a verified key is remembered for at
// most this long, then read again. Every replica reads the one table, so
// within this bound of a revocation's commit, no replica opens a route to
// the key. Short enough for a person who revokes a leaked key; long
// enough that a busy key costs its replica one read every few seconds.
const RevocationBound = 3 * time.Second

// LastUsedInterval is how often a key's last_used_at is written at most:
// a key in constant use writes its row once a minute, not once a request.
const LastUsedInterval = time.Minute

// cacheSize bounds the keys a verifier remembers; when full it is emptied
// (simpler than an LRU, and as good for a working set that fits).
const cacheSize = 4096

// Caller is the key a token verified as.
type Caller struct {
	OrganizationID uuid.UUID
	KeyID          uuid.UUID
	Prefix         string
	Scopes         []Scope
	// ExpiresAt is the key's expiry; zero when it has none.
	ExpiresAt time.Time
}

// Has reports whether the key carries scope.
func (c Caller) Has(scope Scope) bool { return slices.Contains(c.Scopes, scope) }

// Actor is what the key's actions record as their actor: key:<prefix>.
func (c Caller) Actor() string { return "key:" + c.Prefix }

// Verifier verifies service keys' tokens against the store. It is safe for
// concurrent use; build one per process.
type Verifier struct {
	store *Store
	mu    sync.RWMutex
	// entries are the keys verified within RevocationBound, by the
	// SHA-256 of the whole token.
	entries map[[32]byte]cached
}

type cached struct {
	c     Caller
	until time.Time
}

// NewVerifier returns a verifier of the keys of store, judged at the
// store's clock.
func NewVerifier(store *Store) *Verifier {
	return &Verifier{store: store, entries: make(map[[32]byte]cached)}
}

// Verify returns the key raw is the token of: a live key (neither revoked
// nor expired at most [RevocationBound] ago) whose secret's hash is the
// stored one, compared in constant time. It returns [ErrInvalidKey] for
// any other string, and the database's errors as kinds (an unavailable
// database is errs.Unavailable, not a refusal).
func (v *Verifier) Verify(ctx context.Context, raw string) (Caller, error) {
	now := v.store.clock.Now()
	id := sha256.Sum256([]byte(raw))
	v.mu.RLock()
	e, ok := v.entries[id]
	v.mu.RUnlock()
	if ok && now.Before(e.until) {
		return e.c, nil
	}
	c, err := v.store.lookup(ctx, raw)
	if err != nil {
		return Caller{}, err
	}
	until := now.Add(RevocationBound)
	if !c.ExpiresAt.IsZero() && c.ExpiresAt.Before(until) {
		until = c.ExpiresAt
	}
	v.mu.Lock()
	if len(v.entries) >= cacheSize {
		clear(v.entries)
	}
	v.entries[id] = cached{c: c, until: until}
	v.mu.Unlock()
	return c, nil
}

// lookup reads the live key raw names and checks its secret, then records
// its use when the last one recorded is [LastUsedInterval] old.
func (s *Store) lookup(ctx context.Context, raw string) (_ Caller, err error) {
	defer dberr.Annotate(&err)
	org, prefix, hash, ok := parseToken(raw)
	if !ok {
		return Caller{}, ErrInvalidKey
	}
	var stored []byte
	k, err := scanKey(s.db.QueryRow(ctx, keyByPrefix, org, prefix, s.clock.Arg()), &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return Caller{}, ErrInvalidKey
	}
	if err != nil {
		return Caller{}, err
	}
	if subtle.ConstantTimeCompare(stored, hash[:]) != 1 {
		return Caller{}, ErrInvalidKey
	}
	if k.LastUsedAt == nil || s.clock.Now().Sub(*k.LastUsedAt) >= LastUsedInterval {
		if _, err := s.db.Exec(ctx, keyTouch, org, k.ID, LastUsedInterval.Microseconds(), s.clock.Arg()); err != nil {
			return Caller{}, err
		}
	}
	c := Caller{OrganizationID: org, KeyID: k.ID, Prefix: k.Prefix, Scopes: k.Scopes}
	if k.ExpiresAt != nil {
		c.ExpiresAt = *k.ExpiresAt
	}
	return c, nil
}

// Service is the store and the verifier of one process, as the API takes
// them.
type Service struct {
	*Store
	*Verifier
}

// NewService returns the store of keys on db at clock (nil: the
// database's) and its verifier.
func NewService(db DB, clock *dbclock.Clock) *Service {
	s := NewStore(db, clock)
	return &Service{Store: s, Verifier: NewVerifier(s)}
}
