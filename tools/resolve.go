package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/ids"
)

// Resolution is what a person decided about an uncertain call.
type Resolution string

const (
	// ResolutionDelivered: the call had its effect. The stored answer
	// becomes a success naming the actor in ResolvedBy, which every repeat
	// of the call replays.
	ResolutionDelivered Resolution = "delivered"
	// ResolutionRetry: the call had no effect. The uncertain answer is
	// removed, so the next attempt under the key calls the tool again.
	ResolutionRetry Resolution = "retry"
)

// ResolutionRetention is how long a resolution is recorded: as long as
// its Run.
const ResolutionRetention = 396 * 24 * time.Hour

// Limits of [ResolveParams].
const (
	MaxActorLen  = 255
	MaxReasonLen = 500
)

var (
	// ErrNoCall reports that no retained answer is stored under the key.
	ErrNoCall = errors.New("tools: no call is stored under the key")
	// ErrNotUncertain reports that the call is in flight, answered, or
	// resolved already.
	ErrNotUncertain = errors.New("tools: the call is not uncertain")
)

// ResolveParams name an uncertain call and what a person decided about it.
type ResolveParams struct {
	OrganizationID uuid.UUID
	Scope          string // "tool.<name>"
	Key            string
	Resolution     Resolution
	// Actor names the person who decided: one line of 1 to [MaxActorLen]
	// characters.
	Actor string
	// Reason says why: one line of 1 to [MaxReasonLen] characters.
	Reason string
}

// Resolved is a recorded resolution.
type Resolved struct {
	ID         uuid.UUID
	ClaimID    uuid.UUID
	Resolution Resolution
	Actor      string
	Reason     string
	ResolvedAt time.Time
	Uncertain  Result // the answer before the resolution
}

// ResolverDB is what a [Resolver] needs of a database handle, usually a
// *pgxpool.Pool.
type ResolverDB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ResolverConfig configures a [Resolver].
type ResolverConfig struct {
	// Clock is the database clock resolutions are stamped and retention
	// judged by. Nil (the default) uses the database's now(); tests hand
	// in the stub the plane runs at.
	Clock *dbclock.Clock
}

// Resolver records a person's resolution of an uncertain call, the one
// way an uncertain answer changes (`searchd claims resolve`). It is safe
// for concurrent use.
type Resolver struct {
	db    ResolverDB
	clock *dbclock.Clock
}

// NewResolver returns a resolver on db.
func NewResolver(db ResolverDB, cfg ResolverConfig) *Resolver {
	return &Resolver{db: db, clock: cfg.Clock}
}

// Validate returns an error wrapping [ErrInvalid] that names the field when
// p cannot be a resolution.
func (p ResolveParams) Validate() error {
	invalid := func(field, reason string) error { return fmt.Errorf("%w: %s %s", ErrInvalid, field, reason) }
	switch {
	case p.OrganizationID == uuid.Nil:
		return invalid("organization id", "is the nil UUID")
	case !strings.HasPrefix(p.Scope, idempotency.ToolScopePrefix):
		return invalid("scope", fmt.Sprintf("%q is not a tool scope (tool.<name>): only a tool call is ever uncertain", p.Scope))
	case p.Resolution != ResolutionDelivered && p.Resolution != ResolutionRetry:
		return invalid("resolution", fmt.Sprintf("%q is neither %s nor %s", p.Resolution, ResolutionDelivered, ResolutionRetry))
	}
	if _, err := idempotency.Retention(p.Scope); err != nil {
		return invalid("scope", fmt.Sprintf("%q is not a tool scope (tool.<name>)", p.Scope))
	}
	if err := idempotency.ValidateKey(p.Key); err != nil {
		return fmt.Errorf("%w: key: %w", ErrInvalid, err)
	}
	if reason := oneLine(p.Actor, MaxActorLen); reason != "" {
		return invalid("actor", reason)
	}
	if reason := oneLine(p.Reason, MaxReasonLen); reason != "" {
		return invalid("reason", reason)
	}
	return nil
}

// oneLine says what is wrong with s as one line of at most n characters, or
// "" when nothing is.
func oneLine(s string, n int) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "is required"
	case !utf8.ValidString(s) || utf8.RuneCountInString(s) > n:
		return fmt.Sprintf("must be valid UTF-8 of at most %d characters", n)
	case strings.ContainsFunc(s, unicode.IsControl):
		return "must be one line, without control characters"
	}
	return ""
}

// Resolve records p, with the uncertain answer, in one transaction. Two
// resolutions of one call serialize on its claim's row lock, so only the
// first finds it uncertain.
//
// It returns an error wrapping [ErrInvalid] for params
// [ResolveParams.Validate] refuses, [ErrNoCall], [ErrNotUncertain], or the
// database's error; nothing is written on any error.
func (r *Resolver) Resolve(ctx context.Context, p ResolveParams) (*Resolved, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.Actor, p.Reason = strings.TrimSpace(p.Actor), strings.TrimSpace(p.Reason)
	now := r.clock.Arg()
	var out *Resolved
	err := pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
		var (
			claimID  uuid.UUID
			status   string
			response json.RawMessage
			retained bool
			observed time.Time
		)
		err := tx.QueryRow(ctx, callLock, p.OrganizationID, p.Scope, p.Key, now).
			Scan(&claimID, &status, &response, &retained, &observed)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ErrNoCall
		case err != nil:
			return err
		case !retained:
			return ErrNoCall
		case status != string(idempotency.StatusCompleted):
			return fmt.Errorf("%w: the call is still in flight (its claim is %s)", ErrNotUncertain, status)
		}
		prev, err := DecodeAnswer(response, "", "")
		if err != nil {
			return fmt.Errorf("%w: its stored answer is not a tool answer", ErrNotUncertain)
		}
		if !prev.Uncertain() {
			return fmt.Errorf("%w: its answer is %s", ErrNotUncertain, prev.Outcome)
		}

		sql, args := callAuthorizeRetry, []any{p.OrganizationID, claimID}
		if p.Resolution == ResolutionDelivered {
			body, err := EncodeAnswer(Result{OK: true, Outcome: OutcomeOK, ResolvedBy: p.Actor})
			if err != nil {
				return err
			}
			sql, args = callMarkDelivered, append(args, string(body))
		}
		tag, err := tx.Exec(ctx, sql, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%w: another resolution came first", ErrNotUncertain)
		}
		res := &Resolved{ID: ids.New(), ClaimID: claimID, Resolution: p.Resolution, Actor: p.Actor, Reason: p.Reason, Uncertain: prev}
		if err := tx.QueryRow(ctx, resolutionInsert, pgx.StrictNamedArgs{
			"id": res.ID, "org": p.OrganizationID, "scope": p.Scope, "key": p.Key, "claim_id": claimID,
			"resolution": string(p.Resolution), "actor": p.Actor, "reason": p.Reason,
			"uncertain_answer": string(response), "retention_us": ResolutionRetention.Microseconds(), "now": now,
		}).Scan(&res.ResolvedAt); err != nil {
			return err
		}
		out = res
		return nil
	})
	switch {
	case errors.Is(err, ErrNoCall), errors.Is(err, ErrNotUncertain):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("tools: resolve %s key %s: %w", p.Scope, p.Key, err)
	}
	return out, nil
}
