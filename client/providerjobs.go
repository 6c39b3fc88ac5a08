package client

import (
	"context"
	"net/http"
)

// RegisterProviderJob registers a job the caller started at an outside
// provider for a Run, and returns it with its CallbackPath, which the
// caller hands to the provider as the job's callback URL.
//
// A registration is safe to repeat: it carries an Idempotency-Key (minted
// per call unless [WithIdempotencyKey] gives one) that the server claims on
// its idempotency plane, and the provider job id names one job per Run
// besides. So the call is retried on every transient failure, like a
// start (see the package comment). After an attempt whose answer was lost,
// the retry replays what that attempt registered;
// [RegisterProviderJobResult.Created] says what that means for Created.
//
// Errors: [ErrValidation] for a run_id that is not a UUID, a provider
// name that is malformed or has no callback secret on the server, or a
// provider job id out of its rules (the APIError's Errors name the
// fields); [ErrNotFound] for a Run the organization does not have;
// [ErrAlreadyRegistered] when the organization registered the provider
// job id with the provider already, for another Run; [ErrUnauthorized].
// Another organization's job with the same provider job id is no
// conflict: each organization gets a job of its own.
func (c *Client) RegisterProviderJob(ctx context.Context, p RegisterProviderJobParams, opts ...StartOption) (*RegisterProviderJobResult, error) {
	var out RegisterProviderJobResult
	res, err := c.call(ctx, keyed(newRequest(http.MethodPost, "/v1/provider-jobs", p, repeatable), opts), &out.Job)
	if err != nil {
		return nil, err
	}
	out.Created = res.status == http.StatusCreated
	out.Attempts = res.attempts
	return &out, nil
}

// GetProviderJob reads a provider job by searchd's id of it (the ID of
// [ProviderJob], not the provider's id). It returns [ErrNotFound] for a
// job the organization does not have: another organization's, none, or an
// id that is not a UUID; [ErrUnauthorized].
func (c *Client) GetProviderJob(ctx context.Context, id string) (*ProviderJob, error) {
	return fetch[ProviderJob](ctx, c, get("/v1/provider-jobs/", id, ""))
}

// ListProviderJobDrops returns the deliveries of a provider job that
// searchd dropped (duplicate, hash_mismatch, job_mismatch), newest first,
// at most 500. It returns [ErrNotFound] for a job the organization does
// not have.
func (c *Client) ListProviderJobDrops(ctx context.Context, id string) ([]ProviderJobDrop, error) {
	list, err := fetch[struct {
		Items []ProviderJobDrop `json:"items"`
	}](ctx, c, get("/v1/provider-jobs/", id, "/drops"))
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
