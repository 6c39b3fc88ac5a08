// Package servicekeys stores agent.service_keys: long-lived, scoped,
// revocable bearer credentials an organization gives a service.
//
// A key's token is
//
//	sdk_<organization>_<prefix>_<secret>
//
// with the organization's UUID as 32 hex digits (so verifying reads one
// shard), an 8-character base32 prefix that names the key, and 32 random
// bytes of base64url secret. The token is shown once, by [Store.Create];
// the table holds the secret's SHA-256. [Verifier] caches a verified key
// for at most [RevocationBound].
package servicekeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/sqlarg"
)

// Scope is what a key may do; the set is closed ([Scopes]).
type Scope string

const (
	// ScopeRunsReport opens PUT /v1/runs/{id}/status alone.
	ScopeRunsReport Scope = "runs:report"
	// ScopeStartsWrite opens the routes that start Runs or change what
	// starts them.
	ScopeStartsWrite Scope = "starts:write"
	// ScopeRead opens the reads (GET) of the organization's records.
	ScopeRead Scope = "read"
)

// Scopes returns every scope a key may carry.
func Scopes() []Scope { return []Scope{ScopeRunsReport, ScopeStartsWrite, ScopeRead} }

// TokenPrefix begins every service key's token and no other bearer token.
const TokenPrefix = "sdk_"

// Limits of a key's fields.
const (
	// MaxNameLen bounds a key's name, in characters.
	MaxNameLen = 200
	// MaxActorLen bounds the actor who creates or revokes a key, in bytes.
	MaxActorLen = 255
	// MaxList is the most keys [Store.List] returns, newest first.
	MaxList = 1000
)

var (
	// ErrNotFound reports a key id that names no key of the organization.
	ErrNotFound = errs.New(errs.NotFound, "servicekeys: no such key")
	// ErrInvalid is wrapped by every refusal of a create's input.
	ErrInvalid = errs.New(errs.Invalid, "servicekeys: invalid key")
	// ErrInvalidKey reports a token that is not a live key's.
	ErrInvalidKey = errors.New("servicekeys: invalid key")
)

// Key is a service key as listed: never its secret.
type Key struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	// Prefix names the key within its token.
	Prefix    string     `json:"prefix"`
	Name      string     `json:"name"`
	Scopes    []Scope    `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	ExpiresAt *time.Time `json:"expires_at"`
	// LastUsedAt is the last verification, within [LastUsedInterval].
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	RevokedBy  *string    `json:"revoked_by"`
}

// Actor is what the key's actions record as their actor: key:<prefix>.
func (k *Key) Actor() string { return "key:" + k.Prefix }

// Store keeps service keys. It is safe for concurrent use.
type Store struct {
	db    *pgxpool.Pool
	clock *dbclock.Clock
}

// NewStore returns a store on db; a nil clock means the database's.
func NewStore(db *pgxpool.Pool, clock *dbclock.Clock) *Store { return &Store{db: db, clock: clock} }

// CreateParams are a new key.
type CreateParams struct {
	// Name is 1 to MaxNameLen characters of UTF-8 without NUL.
	Name string `json:"name"`
	// Scopes are at least one of [Scopes], none twice.
	Scopes []Scope `json:"scopes"`
	// ExpiresAt, if set, must be in the future; nil never expires.
	ExpiresAt *time.Time `json:"expires_at"`
	// Actor is recorded as created_by; at most MaxActorLen bytes.
	Actor string `json:"-"`
}

// Validate returns an error wrapping [ErrInvalid] naming p's bad fields,
// judged at now.
func (p CreateParams) Validate(now time.Time) error {
	var fields []errs.Field
	if p.Name == "" || utf8.RuneCountInString(p.Name) > MaxNameLen || !utf8.ValidString(p.Name) || strings.ContainsRune(p.Name, 0) {
		fields = append(fields, errs.Field{Name: "name",
			Message: fmt.Sprintf("is required: 1 to %d characters of UTF-8 without NUL", MaxNameLen)})
	}
	if msg := checkScopes(p.Scopes); msg != "" {
		fields = append(fields, errs.Field{Name: "scopes", Message: msg})
	}
	if p.ExpiresAt != nil && !p.ExpiresAt.After(now) {
		fields = append(fields, errs.Field{Name: "expires_at", Message: "must be in the future"})
	}
	if len(p.Actor) > MaxActorLen {
		fields = append(fields, errs.Field{Name: "", Message: fmt.Sprintf("the actor is over %d bytes", MaxActorLen)})
	}
	if len(fields) == 0 {
		return nil
	}
	return &errs.Error{Kind: errs.Invalid, Message: "servicekeys: invalid key: " + fields[0].Name + " " + fields[0].Message,
		Fields: fields, Err: ErrInvalid}
}

// checkScopes returns why scopes are refused, or "".
func checkScopes(scopes []Scope) string {
	names := make([]string, 0, len(Scopes()))
	for _, s := range Scopes() {
		names = append(names, string(s))
	}
	if len(scopes) == 0 {
		return "needs at least one of " + strings.Join(names, ", ")
	}
	for i, s := range scopes {
		if !slices.Contains(Scopes(), s) {
			return fmt.Sprintf("%q is not a scope: the scopes are %s", s, strings.Join(names, ", "))
		}
		if slices.Contains(scopes[:i], s) {
			return fmt.Sprintf("names %q twice", s)
		}
	}
	return ""
}

// secretLen is 256 bits: 43 base64url characters.
const secretLen = 32

// prefixLen is 40 random bits in base32, unique per organization.
const prefixLen = 8

var prefixEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Create stores a new key of org and returns it with its token, which is
// never stored. It returns an error wrapping [ErrInvalid] for invalid
// params, and database errors as kinds.
func (s *Store) Create(ctx context.Context, org uuid.UUID, p CreateParams) (token string, _ *Key, err error) {
	defer dberr.Annotate(&err)
	if err := p.Validate(s.clock.Now()); err != nil {
		return "", nil, err
	}
	if org == uuid.Nil {
		return "", nil, fmt.Errorf("%w: no organization", ErrInvalid)
	}
	// Retry a rare 40-bit prefix collision a few times.
	for range 3 {
		b := make([]byte, 5+secretLen)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		prefix, secret := prefixEncoding.EncodeToString(b[:5]), base64.RawURLEncoding.EncodeToString(b[5:])
		hash := hashSecret(secret)
		k, err := scanKey(s.db.QueryRow(ctx, keyInsert, org, ids.New(), prefix, hash[:], p.Name, p.Scopes,
			p.Actor, p.ExpiresAt, s.clock.Arg()))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.ConstraintName == "service_keys_prefix_key" {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		return TokenPrefix + hex.EncodeToString(org[:]) + "_" + prefix + "_" + secret, k, nil
	}
	return "", nil, errors.New("servicekeys: no free prefix after three draws")
}

// List returns up to [MaxList] of org's keys, revoked ones too, newest
// first. It returns database errors as kinds.
func (s *Store) List(ctx context.Context, org uuid.UUID) (_ []Key, err error) {
	defer dberr.Annotate(&err)
	rows, err := s.db.Query(ctx, keyList, org, MaxList)
	if err != nil {
		return nil, err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Key])
	if keys == nil && err == nil {
		keys = []Key{}
	}
	return keys, err
}

// Revoke revokes org's key id, recording actor, and returns the key; it
// is idempotent. Replicas refuse the key within [RevocationBound]. It
// returns [ErrNotFound] when org has no key id, and database errors as
// kinds.
func (s *Store) Revoke(ctx context.Context, org, id uuid.UUID, actor string) (_ *Key, err error) {
	defer dberr.Annotate(&err)
	if len(actor) > MaxActorLen {
		return nil, fmt.Errorf("%w: the actor is over %d bytes", ErrInvalid, MaxActorLen)
	}
	k, err := scanKey(s.db.QueryRow(ctx, keyRevoke, org, id, actor, s.clock.Arg()))
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "servicekeys: revoke")
	}
	return k, nil
}

// hashSecret returns the secret's SHA-256. A fast hash suffices for 256
// random bits; bcrypt would only cost CPU on every verification.
func hashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// parseToken splits a token into organization, prefix and secret hash;
// ok is false for a malformed token.
func parseToken(raw string) (org uuid.UUID, prefix string, hash [32]byte, ok bool) {
	rest, found := strings.CutPrefix(raw, TokenPrefix)
	if !found {
		return org, "", hash, false
	}
	orgHex, rest, _ := strings.Cut(rest, "_")
	prefix, secret, _ := strings.Cut(rest, "_")
	b, err := hex.DecodeString(orgHex)
	if err != nil || len(b) != 16 || orgHex != strings.ToLower(orgHex) || len(prefix) != prefixLen ||
		strings.Trim(prefix, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		return org, "", hash, false
	}
	if s, err := base64.RawURLEncoding.Strict().DecodeString(secret); err != nil || len(s) != secretLen {
		return org, "", hash, false
	}
	copy(org[:], b)
	return org, prefix, hashSecret(secret), org != uuid.Nil
}

func scanKey(row pgx.Row, before ...any) (*Key, error) {
	var k Key
	dst := append(before, &k.ID, &k.OrganizationID, &k.Prefix, &k.Name, &k.Scopes, &k.CreatedAt, &k.CreatedBy,
		&k.ExpiresAt, &k.LastUsedAt, &k.RevokedAt, &k.RevokedBy)
	if err := row.Scan(dst...); err != nil {
		return nil, err
	}
	return &k, nil
}
