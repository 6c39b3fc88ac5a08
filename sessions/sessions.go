// Package sessions stores the console's server-side sessions in
// agent.console_sessions.
//
// A session is named by a 32-byte random secret held only in the browser's
// cookie; the table holds its SHA-256, so a copy of the table signs nobody
// in. Expiry is judged by the database clock, so replicas agree, and every
// request reads the row, so [Store.Delete] takes effect at once everywhere.
// A secret is never a bearer token for the API.
package sessions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
)

// How a person signed in.
const (
	// ViaOIDC is a sign-in through the company's provider.
	ViaOIDC = "oidc"
	// ViaToken is a pasted bearer token (development).
	ViaToken = "token"
)

// RoleOperator is the role of an operator, who may name no organization.
const RoleOperator = "operator"

var (
	// ErrNotFound reports a secret with no live session.
	ErrNotFound = errs.New(errs.NotFound, "sessions: no such session")
	// ErrInvalid is wrapped by every input error, returned before any SQL.
	ErrInvalid = errs.New(errs.Invalid, "sessions: invalid input")
)

// MaxActorLen bounds an actor, in bytes.
const MaxActorLen = 255

// Session is a signed-in person.
type Session struct {
	ID uuid.UUID
	// OrganizationID is uuid.Nil for an operator who names none.
	OrganizationID uuid.UUID
	Actor          string
	Role           string
	Via            string
	CreatedAt      time.Time
	ExpiresAt      time.Time
}

// Store keeps sessions. It is safe for concurrent use.
type Store struct {
	db    *pgxpool.Pool
	clock *dbclock.Clock
}

// NewStore returns a store on db; a nil clock means the database's.
func NewStore(db *pgxpool.Pool, clock *dbclock.Clock) *Store { return &Store{db: db, clock: clock} }

// CreateParams are a new session.
type CreateParams struct {
	// OrganizationID may be uuid.Nil only with RoleOperator.
	OrganizationID uuid.UUID
	// Actor is UTF-8 without NUL, at most MaxActorLen bytes; may be "".
	Actor string
	// Role is "" or up to 32 bytes of [a-z_].
	Role string
	// Via is ViaOIDC or ViaToken.
	Via string
	// Lifetime is the session's lifetime; required, positive.
	Lifetime time.Duration
	// NotAfter, when set, ends the session sooner: a pasted token's exp.
	NotAfter time.Time
}

var roleName = regexp.MustCompile(`^[a-z_]{0,32}$`)

// Validate returns an error wrapping [ErrInvalid] naming the bad field.
func (p CreateParams) Validate() error {
	switch {
	case p.OrganizationID == uuid.Nil && p.Role != RoleOperator:
		return fmt.Errorf("%w: a session needs an organization unless its role is %s", ErrInvalid, RoleOperator)
	case len(p.Actor) > MaxActorLen || !utf8.ValidString(p.Actor) || strings.ContainsRune(p.Actor, 0):
		return fmt.Errorf("%w: the actor must be at most %d bytes of UTF-8 without NUL", ErrInvalid, MaxActorLen)
	case !roleName.MatchString(p.Role):
		return fmt.Errorf("%w: %q is not a role name", ErrInvalid, p.Role)
	case p.Via != ViaOIDC && p.Via != ViaToken:
		return fmt.Errorf("%w: via must be %q or %q", ErrInvalid, ViaOIDC, ViaToken)
	case p.Lifetime <= 0:
		return fmt.Errorf("%w: the lifetime must be positive", ErrInvalid)
	}
	return nil
}

// secretLen is the secret's size; its base64url is 43 characters.
const secretLen = 32

// Create stores a new session and returns it with its secret. It returns
// an error wrapping [ErrInvalid] for invalid params, and database errors
// as kinds.
func (s *Store) Create(ctx context.Context, p CreateParams) (secret string, _ *Session, err error) {
	defer dberr.Annotate(&err)
	if err := p.Validate(); err != nil {
		return "", nil, err
	}
	raw := make([]byte, secretLen)
	_, _ = rand.Read(raw) // never fails (crypto/rand)
	org := uuid.NullUUID{UUID: p.OrganizationID, Valid: p.OrganizationID != uuid.Nil}
	notAfter := pgtype.Timestamptz{Time: p.NotAfter, Valid: !p.NotAfter.IsZero()}
	hash := sha256.Sum256(raw)
	sess, err := scan(s.db.QueryRow(ctx, sessionInsert, ids.New(), hash[:], org, p.Actor, p.Role,
		p.Lifetime.Microseconds(), notAfter, p.Via, s.clock.Arg()))
	if err != nil {
		return "", nil, err
	}
	return base64.RawURLEncoding.EncodeToString(raw), sess, nil
}

// Lookup returns the live session of secret, or [ErrNotFound] (without
// SQL for a malformed secret).
func (s *Store) Lookup(ctx context.Context, secret string) (_ *Session, err error) {
	defer dberr.Annotate(&err)
	hash, ok := hashOf(secret)
	if !ok {
		return nil, ErrNotFound
	}
	sess, err := scan(s.db.QueryRow(ctx, sessionByHash, hash, s.clock.Arg()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return sess, err
}

// Delete ends the session of secret, if any; it is idempotent. It
// returns database errors as kinds.
func (s *Store) Delete(ctx context.Context, secret string) (err error) {
	defer dberr.Annotate(&err)
	hash, ok := hashOf(secret)
	if !ok {
		return nil
	}
	_, err = s.db.Exec(ctx, sessionDelete, hash)
	return err
}

// hashOf returns the secret's SHA-256, or false when it is malformed.
func hashOf(secret string) ([]byte, bool) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(secret)
	if err != nil || len(raw) != secretLen {
		return nil, false
	}
	h := sha256.Sum256(raw)
	return h[:], true
}

func scan(row pgx.Row) (*Session, error) {
	var s Session
	// A NULL organization scans as uuid.Nil (uuid.UUID's sql.Scanner).
	if err := row.Scan(&s.ID, &s.OrganizationID, &s.Actor, &s.Role, &s.Via, &s.CreatedAt, &s.ExpiresAt); err != nil {
		return nil, err
	}
	return &s, nil
}
