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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/internal/dberr"
)

// RevocationBound is the longest a replica keeps accepting a key after it
// was revoked or expired: the verifier's cache lifetime.
const RevocationBound = 3 * time.Second

// LastUsedInterval is the most often a key's last_used_at is written.
const LastUsedInterval = time.Minute

// cacheSize bounds the verifier's cache, which is emptied when full.
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

// Verifier verifies tokens against the store. It is safe for concurrent
// use; build one per process.
type Verifier struct {
	store *Store
	mu    sync.RWMutex
	// entries are keyed by the token's SHA-256.
	entries map[[32]byte]cached
}

type cached struct {
	c     Caller
	until time.Time
}

// NewVerifier returns a verifier of store's keys.
func NewVerifier(store *Store) *Verifier {
	return &Verifier{store: store, entries: make(map[[32]byte]cached)}
}

// Verify returns the live key raw is the token of, comparing hashes in
// constant time. It returns [ErrInvalidKey] for anything else, and
// database errors as kinds (errs.Unavailable is not a refusal).
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

// lookup reads and checks the key, recording its use every
// [LastUsedInterval].
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

// Service is a process's store and verifier, as the API takes them.
type Service struct {
	*Store
	*Verifier
}

// NewService returns a store on db (nil clock: the database's) and its
// verifier.
func NewService(db *pgxpool.Pool, clock *dbclock.Clock) *Service {
	s := NewStore(db, clock)
	return &Service{Store: s, Verifier: NewVerifier(s)}
}
