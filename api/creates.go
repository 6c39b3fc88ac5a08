package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/canonjson"
)

// releaseTimeout bounds releasing a keyed create's claim after a failure,
// on a context detached from the request's (which may be why it failed).
const releaseTimeout = 5 * time.Second

// keyedCreate is a create that carries an Idempotency-Key: its key, the
// scope it is claimed in and the hash of its request.
type keyedCreate struct {
	scope, key, hash string
	// resourceType names what the completion records.
	resourceType string
}

// errCreateFenceLost reports a completion the plane refused: the claim's
// lease passed and another request took the key over.
var errCreateFenceLost = errors.New("api: keyed create: claim fence lost")

// optionalKey reads the Idempotency-Key of a create: absent is no key (a
// create without one is not deduplicated, as before keys were honoured);
// present, it must be valid.
func (s *Server) optionalKey(c echo.Context) (string, bool, error) {
	if len(c.Request().Header.Values(HeaderIdempotencyKey)) == 0 {
		return "", false, nil
	}
	key, err := s.idempotencyKey(c)
	return key, err == nil, err
}

// requestHash returns the hash of a create's request: the hex SHA-256 of a
// domain and the canonical JSON of what the request asks for, so requests
// written differently that ask for the same thing hash the same.
func requestHash(domain string, v any) (string, error) {
	doc, err := canonjson.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("api: hashing the request: %w", err)
	}
	sum := sha256.Sum256(append([]byte(domain+"\n"), doc...))
	return hex.EncodeToString(sum[:]), nil
}

// createOnce runs create at most once per key on the idempotency plane (the
// IETF Idempotency-Key draft's semantics), and returns the id of the
// resource the key created and whether this call created it:
//
//   - claimed: create runs in a transaction that also completes the claim
//     with the resource, so the resource exists exactly when the claim
//     names it; a completion the fence refuses rolls back and answers in
//     progress; any failure rolls back and releases the claim, so a retry
//     runs again (a create that failed made nothing to remember);
//   - completed: the id the key created, created false (a replay);
//   - processing: an [*idempotency.InFlightError] (409 in_progress);
//   - conflict: the key was used for another request (422 key_reused).
func (s *Server) createOnce(ctx context.Context, org uuid.UUID, kc keyedCreate,
	create func(ctx context.Context, tx pgx.Tx) (id string, err error)) (string, bool, error) {
	if s.plane == nil || s.pool == nil {
		return "", false, errors.New("api: keyed creates need Deps.Pool")
	}
	out, err := s.plane.Claim(ctx, org, kc.scope, kc.key, kc.hash, idempotency.SurfaceCreateLease)
	if err != nil {
		return "", false, fmt.Errorf("api: keyed create: claim: %w", err)
	}
	switch out.Kind {
	case idempotency.KindCompleted:
		return out.ResourceID, false, nil
	case idempotency.KindProcessing:
		return "", false, out.InFlight(kc.scope, kc.key)
	case idempotency.KindConflict:
		return "", false, errKeyReused
	case idempotency.KindClaimed:
	default:
		return "", false, fmt.Errorf("api: keyed create: claim answered %s", out.Kind)
	}
	var id string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if id, err = create(ctx, tx); err != nil {
			return err
		}
		resp, err := json.Marshal(map[string]string{"id": id})
		if err != nil {
			return err
		}
		ok, err := s.plane.CompleteTx(ctx, tx, out.Claim, idempotency.Completion{
			ResourceType: kc.resourceType, ResourceID: id, Response: resp})
		if err != nil {
			return err
		}
		if !ok {
			return errCreateFenceLost
		}
		return nil
	})
	if errors.Is(err, errCreateFenceLost) {
		return "", false, &idempotency.InFlightError{Scope: kc.scope, Key: kc.key, RetryAfter: time.Second}
	}
	if err != nil {
		// Fenced and conditional on the claim being unfinished: safe even
		// when the commit went through and only its answer was lost.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if _, rerr := s.plane.Release(rctx, out.Claim); rerr != nil {
			s.logger.LogAttrs(rctx, slog.LevelWarn, "releasing a keyed create's claim failed",
				slog.String("scope", kc.scope), slog.String("error", rerr.Error()))
		}
		return "", false, err
	}
	return id, true, nil
}

// errKeyReused is the 422 of a key used for another request.
var errKeyReused = &apiError{status: 422, code: CodeKeyReused,
	detail: "this Idempotency-Key was already used for a different request; use a new key"}

// markReplayed marks an answer replayed from an earlier request's effect.
func markReplayed(c echo.Context) {
	c.Response().Header().Set(HeaderIdempotentReplayed, "true")
}
