package client

import (
	"context"
	"net/http"
	"net/url"
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
	r, err := keyedRequest(http.MethodPost, "/v1/provider-jobs", p, opts)
	if err != nil {
		return nil, err
	}
	var out RegisterProviderJobResult
	res, err := c.call(ctx, r, &out.Job)
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
	if id == "" {
		return nil, errEmptyID
	}
	var job ProviderJob
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/provider-jobs/" + url.PathEscape(id), safety: repeatable}, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// ListProviderJobDrops returns the deliveries of a provider job that
// searchd dropped (duplicate, hash_mismatch, job_mismatch), newest first,
// at most 500. It returns [ErrNotFound] for a job the organization does
// not have.
func (c *Client) ListProviderJobDrops(ctx context.Context, id string) ([]ProviderJobDrop, error) {
	if id == "" {
		return nil, errEmptyID
	}
	var list struct {
		Items []ProviderJobDrop `json:"items"`
	}
	path := "/v1/provider-jobs/" + url.PathEscape(id) + "/drops"
	if _, err := c.call(ctx, request{method: http.MethodGet, path: path, safety: repeatable}, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}
