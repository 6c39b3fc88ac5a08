package providerjobs

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/idempotency"
)

// registerHashDomain names the request hash of a keyed registration;
// stored claims hold hashes made with it.
const registerHashDomain = "searchd.provider_job.register.v1"

// RegisterOnce registers p at most once per idempotency key, claimed on
// the service's plane in [idempotency.ScopeProviderJobRegister]: the
// registration and the claim's completion are one transaction
// ([idempotency.Service.CreateOnce]). The first request with key
// registers as [Service.Register] does (created reports whether it made
// the job); a repeat returns the job it registered, as it is now, with
// replayed true, whatever has been registered since.
//
// Errors: those of [Service.Register]; [idempotency.ErrKeyReused] when key
// was used for a different registration; an [*idempotency.InFlightError]
// while the first request with key is in flight.
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
		// The registration runs on tx, so it commits with the claim.
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
