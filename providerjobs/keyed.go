package providerjobs

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/idempotency"
)

// registerHashDomain is stored in claims, so it must not change.
const registerHashDomain = "searchd.provider_job.register.v1"

// RegisterOnce registers p at most once per idempotency key, the registration
// and the claim's completion committing together; a repeat returns the job as
// it is now with replayed true. Errors: those of [Service.Register],
// [idempotency.ErrKeyReused], and [*idempotency.InFlightError] while the
// first request is in flight.
func (s *Service) RegisterOnce(ctx context.Context, org uuid.UUID, key string, p RegisterParams) (_ *Job, created, replayed bool, err error) {
	hash, err := idempotency.RequestHash(registerHashDomain, p)
	if err != nil {
		return nil, false, false, err
	}
	var (
		job        *Job
		registered bool
	)
	id, first, err := s.plane.CreateOnce(ctx, s.db, idempotency.KeyedCreate{
		Org: org, Scope: idempotency.ScopeProviderJobRegister, Key: key, RequestHash: hash, ResourceType: ResourceType,
	}, func(ctx context.Context, tx pgx.Tx) (string, error) {
		j, made, err := (&Service{db: tx, plane: s.plane, cfg: s.cfg}).Register(ctx, org, p)
		if err != nil {
			return "", err
		}
		job, registered = j, made
		return j.ID.String(), nil
	})
	if err != nil {
		return nil, false, false, err
	}
	if first {
		return job, registered, false, nil
	}
	jobID, err := uuid.Parse(id)
	if err != nil {
		return nil, false, false, fmt.Errorf("providerjobs: the claim names provider job %q: %w", id, err)
	}
	if job, err = s.Get(ctx, org, jobID); err != nil {
		return nil, false, false, err
	}
	return job, false, true, nil
}
