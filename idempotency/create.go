package idempotency

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/canonjson"
	"github.com/searchd/searchd/internal/dberr"
)

// KeyedCreate is a create that carries an idempotency key: the key, the
// scope it is claimed in and the hash of its request.
type KeyedCreate struct {
	Org         uuid.UUID
	Scope, Key  string
	RequestHash string
	// ResourceType names what the completion records.
	ResourceType string
	// ReleaseTimeout bounds releasing the claim after a failure, on a
	// context detached from the caller's (which may be why it failed).
	// Zero is 5 s.
	ReleaseTimeout time.Duration
}

// Beginner starts a transaction; a *pgxpool.Pool is one.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// errCreateFenceLost reports a completion the plane refused: the claim's
// lease passed and another request took the key over.
var errCreateFenceLost = errors.New("idempotency: keyed create: claim fence lost")

// CreateOnce runs create at most once per key (the IETF Idempotency-Key
// draft's semantics) and returns the id of the resource the key created
// and whether this call created it. The claim takes [SurfaceCreateLease].
//
//   - claimed: create runs in a transaction on db that also completes the
//     claim with the resource, so the resource exists exactly when the
//     claim names it; any failure rolls back and releases the claim, so a
//     retry runs again (a create that failed made nothing to remember);
//   - completed: the id the key created, created false (a replay);
//   - processing, or a completion the fence refused because another
//     request took the key over: an [*InFlightError];
//   - conflict: the key was used for another request: an error of kind
//     errs.KeyReused, matched by [ErrKeyReused].
//
// Errors of create are returned as they are, so its kinds decide the
// answer; a failed release is joined to them as text only. Database
// failures are classified by internal/dberr (errs.Unavailable when
// transient).
func (s *Service) CreateOnce(ctx context.Context, db Beginner, kc KeyedCreate,
	create func(ctx context.Context, tx pgx.Tx) (id string, err error)) (_ string, _ bool, err error) {
	defer dberr.Annotate(&err)
	out, err := s.Claim(ctx, kc.Org, kc.Scope, kc.Key, kc.RequestHash, SurfaceCreateLease)
	if err != nil {
		return "", false, fmt.Errorf("idempotency: keyed create: claim: %w", err)
	}
	switch out.Kind {
	case KindCompleted:
		return out.ResourceID, false, nil
	case KindProcessing:
		return "", false, out.InFlight(kc.Scope, kc.Key)
	case KindConflict:
		return "", false, ErrKeyReused
	case KindClaimed:
	default:
		return "", false, fmt.Errorf("idempotency: keyed create: claim answered %s", out.Kind)
	}
	var id string
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		if id, err = create(ctx, tx); err != nil {
			return err
		}
		resp, err := json.Marshal(map[string]string{"id": id})
		if err != nil {
			return err
		}
		ok, err := s.CompleteTx(ctx, tx, out.Claim, Completion{
			ResourceType: kc.ResourceType, ResourceID: id, Response: resp})
		if err != nil {
			return err
		}
		if !ok {
			return errCreateFenceLost
		}
		return nil
	})
	if errors.Is(err, errCreateFenceLost) {
		return "", false, &InFlightError{Scope: kc.Scope, Key: kc.Key, RetryAfter: time.Second}
	}
	if err != nil {
		// Fenced and conditional on the claim being unfinished: safe even
		// when the commit went through and only its answer was lost.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(kc.ReleaseTimeout, 5*time.Second))
		defer cancel()
		if _, rerr := s.Release(rctx, out.Claim); rerr != nil {
			// %v, not %w: the release's failure is worth reading, but the
			// create's error alone decides what the caller is told.
			err = errors.Join(err, fmt.Errorf("idempotency: releasing the keyed create's claim failed: %v", rerr))
		}
		return "", false, err
	}
	return id, true, nil
}

// RequestHash returns the hash of a keyed create's request: the hex SHA-256
// of domain, a newline and the canonical JSON of v (what the request asks
// for), so requests written differently that ask for the same thing hash
// the same. domain names the request and its encoding's version
// ("searchd.saved_search.create.v1"): stored claims hold these hashes, so
// neither may change.
func RequestHash(domain string, v any) (string, error) {
	doc, err := canonjson.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("idempotency: hashing the request: %w", err)
	}
	sum := sha256.Sum256(append([]byte(domain+"\n"), doc...))
	return hex.EncodeToString(sum[:]), nil
}
