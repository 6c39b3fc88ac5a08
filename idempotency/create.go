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

// KeyedCreate describes a create that carries an idempotency key.
type KeyedCreate struct {
	Org         uuid.UUID
	Scope, Key  string
	RequestHash string
	// ResourceType names what the completion records.
	ResourceType string
	// ReleaseTimeout bounds releasing the claim after a failure. Zero is 5 s.
	ReleaseTimeout time.Duration
}

// Beginner starts a transaction; a *pgxpool.Pool is one.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

var errCreateFenceLost = errors.New("idempotency: keyed create: claim fence lost")

// CreateOnce runs create at most once per key and returns the created id and
// whether this call created it. create runs in the transaction that completes
// the claim; on failure it rolls back and the claim is released. A replay
// returns the stored id; a live or taken-over claim an [*InFlightError]; a
// different request [ErrKeyReused]; create's errors are returned unchanged.
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
		// Safe even if the commit went through: release is fenced and conditional.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(kc.ReleaseTimeout, 5*time.Second))
		defer cancel()
		if _, rerr := s.Release(rctx, out.Claim); rerr != nil {
			// %v, not %w: only create's error decides what the caller sees.
			err = errors.Join(err, fmt.Errorf("idempotency: releasing the keyed create's claim failed: %v", rerr))
		}
		return "", false, err
	}
	return id, true, nil
}

// RequestHash returns the hex SHA-256 of domain, a newline and the canonical
// JSON of v. domain names the request and its encoding's version
// ("searchd.saved_search.create.v1"); stored claims hold these hashes, so
// neither may change.
func RequestHash(domain string, v any) (string, error) {
	doc, err := canonjson.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("idempotency: hashing the request: %w", err)
	}
	sum := sha256.Sum256(append([]byte(domain+"\n"), doc...))
	return hex.EncodeToString(sum[:]), nil
}
