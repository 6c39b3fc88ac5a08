package client

import (
	"encoding/json"
	"time"
)

// The types below mirror the bodies of the API (api/openapi.json): the same
// snake_case JSON names, ids as the UUID strings the API writes, times as
// RFC 3339. Unknown fields in answers are ignored, so a newer server does
// not break an older client.

// Brief is what a saved search looks for.
type Brief struct {
	// Query is 1 to 2000 characters.
	Query string `json:"query"`
	// Filters are free-form. Numbers in answers decode as json.Number, so
	// a filter value survives a round trip exactly as it was written.
	Filters map[string]any `json:"filters,omitempty"`
}

// Baseline is the results a saved search has already seen.
type Baseline struct {
	// Items holds at most 10000 strings of 1 to 200 characters. Nil in a
	// request means none.
	Items []string `json:"items"`
	// Cursor is where the last search stopped; nil when it has not run.
	Cursor *string `json:"cursor"`
}

// SavedSearch is a live saved search with its baseline.
type SavedSearch struct {
	ID             string   `json:"id"`
	OrganizationID string   `json:"organization_id"`
	Name           string   `json:"name"`
	Brief          Brief    `json:"brief"`
	Baseline       Baseline `json:"baseline"`
	// Version starts at 1 and grows by one on every change.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// ArchivedAt is when it was archived; nil while it is live.
	ArchivedAt *time.Time `json:"archived_at"`
}

// CreateSavedSearchParams are the body of [Client.CreateSavedSearch].
type CreateSavedSearchParams struct {
	// Name is 1 to 200 characters. Required.
	Name string `json:"name"`
	// Brief is required.
	Brief Brief `json:"brief"`
	// Baseline defaults to no items and a nil cursor.
	Baseline *Baseline `json:"baseline,omitempty"`
}

// UpdateSavedSearchParams are the body of [Client.UpdateSavedSearch]: a
// nil field keeps its value; at least one must be set.
type UpdateSavedSearchParams struct {
	// Name, when set, is 1 to 200 characters.
	Name *string `json:"name,omitempty"`
	// Brief, when set, replaces the whole brief.
	Brief *Brief `json:"brief,omitempty"`
	// IfVersion, when not zero, makes the change conditional on the saved
	// search being at that version (If-Match); see
	// [Client.UpdateSavedSearch].
	IfVersion int64 `json:"-"`
}

// ListParams select a page of a list.
type ListParams struct {
	// Limit is the page size, 1 to 200; zero means the server's default
	// (50).
	Limit int
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
	// Archived lists the archived saved searches instead of the live ones
	// ([Client.ListSavedSearches] and [Client.SavedSearches] alone).
	Archived bool
}

// ListRunsParams select a page of Runs. Each filter that is set keeps the
// Runs it matches; pass the same filters with the Cursor of the page
// before.
type ListRunsParams struct {
	// SavedSearchID, when set, keeps the Runs of that saved search alone.
	SavedSearchID string
	// Status, when set, keeps the Runs in this status (queued,
	// dispatched, running, succeeded, failed or cancelled).
	Status string
	// IdempotencyKey, when set, keeps the Runs started with this
	// Idempotency-Key: at most two, a saved-search start's and a direct
	// start's.
	IdempotencyKey string
	// CreatedAfter and CreatedBefore, when not zero, keep the Runs
	// created strictly after and strictly before them (microsecond
	// precision; the years 1 to 9999).
	CreatedAfter, CreatedBefore time.Time
	// Limit is the page size, 1 to 200; zero means the server's default
	// (50).
	Limit int
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
}

// SavedSearchSummary is a saved search as the list shows it: without the
// filters and the baseline, which [Client.GetSavedSearch] reads.
type SavedSearchSummary struct {
	ID             string `json:"id"`
	OrganizationID string `json:"organization_id"`
	Name           string `json:"name"`
	// Query is the brief's query.
	Query     string    `json:"query"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// BriefBytes is the stored brief's size as JSON text; BaselineItems
	// counts the baseline's items.
	BriefBytes    int64 `json:"brief_bytes"`
	BaselineItems int64 `json:"baseline_items"`
	// ArchivedAt is when it was archived: set in a list of the archived
	// ones (ListParams.Archived).
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

// Page is a page of a list.
type Page[T any] struct {
	Items []T `json:"items"`
	// NextCursor fetches the next page; empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// SavedSearchPage is a page of saved-search summaries, newest first.
type SavedSearchPage = Page[SavedSearchSummary]

// RunListItem is a Run as the list shows it: without its input, which
// [Client.GetRun] reads, and with the input's size instead.
type RunListItem struct {
	ID             string          `json:"id"`
	OrganizationID string          `json:"organization_id"`
	Kind           string          `json:"kind"`
	SavedSearchID  *string         `json:"saved_search_id"`
	SnapshotID     *string         `json:"snapshot_id"`
	Name           *string         `json:"name"`
	Status         string          `json:"status"`
	Options        json.RawMessage `json:"options"`
	// InputBytes is the size of a direct Run's input as JSON text; nil
	// for a saved-search Run.
	InputBytes  *int64    `json:"input_bytes"`
	CreatedAt   time.Time `json:"created_at"`
	RetainUntil time.Time `json:"retain_until"`
	Version     int64     `json:"version"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// RunPage is a page of Run list items, newest first.
type RunPage = Page[RunListItem]

// Kinds of Run.
const (
	KindSavedSearch = "saved_search"
	KindCapability  = "capability"
	KindDefinition  = "definition"
)

// Run is an admitted Run.
type Run struct {
	ID             string `json:"id"`
	OrganizationID string `json:"organization_id"`
	// Kind is KindSavedSearch, KindCapability or KindDefinition.
	Kind string `json:"kind"`
	// SavedSearchID and SnapshotID are set for a saved-search Run alone.
	SavedSearchID *string `json:"saved_search_id"`
	SnapshotID    *string `json:"snapshot_id"`
	Name          *string `json:"name"`
	// Status is queued (admitted), dispatched (the runtime took it),
	// running, succeeded, failed or cancelled (as the runtime reported);
	// see the Status constants.
	Status string `json:"status"`
	// Options are the normalized start options of a saved-search Run.
	Options json.RawMessage `json:"options"`
	// Input is the canonical input of a direct Run.
	Input     json.RawMessage `json:"input"`
	CreatedAt time.Time       `json:"created_at"`
	// RetainUntil is CreatedAt plus 396 days: until then the start's
	// Idempotency-Key replays this Run.
	RetainUntil time.Time `json:"retain_until"`
	// CreatedBy is the actor that started the Run (the token's sub); nil
	// when it had none.
	CreatedBy *string `json:"created_by"`
	// IdempotencyKey is the key the Run was started with.
	IdempotencyKey string `json:"idempotency_key"`
	// Version is 1 at admission and grows by one with every change of
	// status; UpdatedAt is when the status last changed.
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
	// ResultRef is what a succeeded Run produced, as its runtime reported
	// it; nil otherwise.
	ResultRef *string `json:"result_ref"`
	// Error is how a failed or cancelled Run ended, as its runtime
	// reported it; nil otherwise.
	Error *RunError `json:"error"`
	// CancelRequestedAt is when a cancel was first asked for
	// ([Client.CancelRun]); nil when nobody cancelled the Run.
	CancelRequestedAt *time.Time `json:"cancel_requested_at"`
	// Dispatch is the Run's hand-off to the runtime: set by [Client.GetRun]
	// alone (a start's and a report's answers have none).
	Dispatch *Dispatch `json:"dispatch,omitempty"`
}

// Statuses of a Run. It only moves forward, and a finished one (succeeded,
// failed, cancelled) never changes.
const (
	StatusQueued     = "queued"
	StatusDispatched = "dispatched"
	StatusRunning    = "running"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// RunError is how a failed or cancelled Run ended.
type RunError struct {
	// Code is a machine code: 1 to 100 of a-z, 0-9, '_', '.', '-'.
	Code string `json:"code"`
	// Message is for a person; nil for none.
	Message *string `json:"message"`
}

// Dispatch is the hand-off of a Run to the runtime: the outbox row its
// admission wrote.
type Dispatch struct {
	// State is pending (to deliver), dispatched (the runtime answered 2xx)
	// or failed (the runtime refused it; an operator retries it).
	State string `json:"state"`
	// Attempts counts the deliveries tried.
	Attempts int `json:"attempts"`
	// NextAttemptAt is when a pending dispatch is due; nil otherwise.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	DispatchedAt  *time.Time `json:"dispatched_at"`
	FailedAt      *time.Time `json:"failed_at"`
	// LastStatusCode is the runtime's last HTTP status; nil when none
	// came. LastError is what went wrong with the last attempt that did
	// not deliver; nil once delivered.
	LastStatusCode *int    `json:"last_status_code"`
	LastError      *string `json:"last_error"`
	// Retries counts the operator retries of a failed dispatch.
	Retries int `json:"retries"`
}

// StatusReport is a runtime's report of a Run's status, for
// [Client.ReportRunStatus].
type StatusReport struct {
	// Status is StatusRunning, StatusSucceeded, StatusFailed or
	// StatusCancelled.
	Status string `json:"status"`
	// ResultRef names what a succeeded Run produced (1 to 2048 bytes);
	// only with StatusSucceeded; empty for none.
	ResultRef string `json:"result_ref,omitempty"`
	// Error is how a failed or cancelled Run ended; only with those.
	Error *RunError `json:"error,omitempty"`
}

// SnapshotSummary names the frozen input of a saved-search start.
type SnapshotSummary struct {
	ID                 string    `json:"id"`
	SavedSearchID      string    `json:"saved_search_id"`
	SavedSearchVersion int64     `json:"saved_search_version"`
	ContentHash        string    `json:"content_hash"`
	CreatedAt          time.Time `json:"created_at"`
}

// Snapshot is the immutable copy of a saved search's brief and baseline a
// start froze.
type Snapshot struct {
	ID                 string   `json:"id"`
	OrganizationID     string   `json:"organization_id"`
	SavedSearchID      string   `json:"saved_search_id"`
	SavedSearchVersion int64    `json:"saved_search_version"`
	Brief              Brief    `json:"brief"`
	Baseline           Baseline `json:"baseline"`
	ContentHash        string   `json:"content_hash"`
	// CreatedBy is the sub claim of the token that started it, if any.
	CreatedBy *string `json:"created_by"`
	// Origin is "api" for a client's start, "schedule" for a start the
	// saved search's schedule made (for the actor who set it, CreatedBy).
	Origin    string    `json:"origin"`
	CreatedAt time.Time `json:"created_at"`
}

// SnapshotListItem is a snapshot as its saved search's audit trail lists
// it: without the brief and the baseline, which [Client.GetSnapshot]
// reads.
type SnapshotListItem struct {
	ID                 string    `json:"id"`
	SavedSearchID      string    `json:"saved_search_id"`
	SavedSearchVersion int64     `json:"saved_search_version"`
	ContentHash        string    `json:"content_hash"`
	CreatedBy          *string   `json:"created_by"`
	Origin             string    `json:"origin"`
	CreatedAt          time.Time `json:"created_at"`
	BriefBytes         int64     `json:"brief_bytes"`
	BaselineBytes      int64     `json:"baseline_bytes"`
	BaselineItems      int64     `json:"baseline_items"`
}

// SnapshotPage is a page of a saved search's snapshots, newest first.
type SnapshotPage = Page[SnapshotListItem]

// StartOptions are the body of a saved-search start. The zero value takes
// every default.
type StartOptions struct {
	// MaxResults is 1 to 1000; zero means the server's default (100).
	MaxResults int `json:"max_results,omitempty"`
	// Note is up to 500 characters.
	Note string `json:"note,omitempty"`
}

// DirectStart is the body of a capability or definition start.
type DirectStart struct {
	// Kind is KindCapability or KindDefinition. Required.
	Kind string `json:"kind"`
	// Name is 1 to 200 characters. Required.
	Name string `json:"name"`
	// Input is anything that encodes as a JSON object (a map, a struct, a
	// json.RawMessage); nil means {}.
	Input any `json:"input,omitempty"`
}

// StartResult is the answer of a start.
type StartResult struct {
	Run Run `json:"run"`
	// Snapshot is the frozen input of a saved-search start; nil for a
	// direct start.
	Snapshot *SnapshotSummary `json:"snapshot"`
	// Created reports whether the answer was the admission itself (201).
	// When an attempt admitted the Run but its answer was lost, the retry
	// that follows is answered as a replay: Created is false and Replayed
	// true, though this call's key did start the Run.
	Created bool `json:"-"`
	// Replayed reports whether the answer was a replay of an earlier
	// admission under the same key (200 with Idempotent-Replayed: true).
	Replayed bool `json:"-"`
	// IdempotencyKey is the key the start was sent with, minted or given.
	IdempotencyKey string `json:"-"`
	// Attempts is how many attempts the call made.
	Attempts int `json:"-"`
}

// RegisterProviderJobParams are the body of [Client.RegisterProviderJob].
// All three fields are required.
type RegisterProviderJobParams struct {
	// RunID is a Run of the caller's organization.
	RunID string `json:"run_id"`
	// Provider names the provider that runs the job: a lower-case dotted
	// identifier (letters a-z, digits, '_' and '-', dots between them, at
	// most 100 characters) the server holds a callback secret for
	// (SEARCHD_PROVIDER_SECRETS).
	Provider string `json:"provider"`
	// ProviderJobID is the provider's own id of the job: 1 to 255
	// characters without control characters. It names one job per
	// organization and provider.
	ProviderJobID string `json:"provider_job_id"`
}

// ProviderJob is a job started at an outside provider for a Run, as
// searchd tracks it from the provider's callbacks.
type ProviderJob struct {
	// ID is searchd's id of the job, not the provider's: callbacks and
	// [Client.GetProviderJob] address the job by it.
	ID string `json:"id"`
	// OrganizationID is the organization that registered the job.
	OrganizationID string `json:"organization_id"`
	// RunID is the Run the job was registered for.
	RunID string `json:"run_id"`
	// Provider names the provider that runs the job.
	Provider string `json:"provider"`
	// ProviderJobID is the provider's own id of the job, unique within
	// the organization and provider; a callback's body names the job by
	// it.
	ProviderJobID string `json:"provider_job_id"`
	// Status is pending at registration, then running, succeeded or
	// failed as the provider's callbacks say. succeeded and failed are
	// final: no later callback changes the job.
	Status string `json:"status"`
	// Result is the object the last applied callback carried; nil when
	// it carried none (the API's null), as at registration. Numbers
	// decode as json.Number, so they survive exactly as the provider
	// wrote them.
	Result map[string]any `json:"result"`
	// Version is 1 at registration and grows by one with every applied
	// callback.
	Version int64 `json:"version"`
	// CreatedAt is when the job was registered; UpdatedAt when it last
	// changed (CreatedAt until a callback is applied).
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// CallbackPath is the path the provider calls back on about this job,
	// "/v1/callbacks/<provider>/jobs/<id>" (searchd's id, never the
	// provider's). Hand it to the provider, joined to searchd's public
	// base URL, as the job's callback URL. The callbacks themselves are the
	// provider's, signed with its secret (Standard Webhooks), not calls of
	// this client.
	CallbackPath string `json:"callback_path"`
}

// RegisterProviderJobResult is the answer of [Client.RegisterProviderJob].
type RegisterProviderJobResult struct {
	// Job is the registered job as it is now: pending after a fresh
	// registration, possibly moved on by callbacks after a repeated one.
	Job ProviderJob
	// Created reports whether the answer was the registration itself
	// (201): the call's final attempt created the job. False means the
	// job already existed for this Run when that attempt arrived (200):
	// registered by an earlier call, or by an earlier attempt of this very
	// call whose answer was lost, so Created false with Attempts above 1
	// cannot tell the two apart. Either way the job is registered once
	// and Job is it.
	Created bool
	// Attempts is how many attempts the call made.
	Attempts int
}

// ProviderJobDrop is one delivery of a provider job that searchd dropped.
type ProviderJobDrop struct {
	ID string `json:"id"`
	// DeliveryID is the delivery's webhook-id.
	DeliveryID string `json:"delivery_id"`
	// Reason is duplicate, hash_mismatch, job_mismatch or path_mismatch.
	Reason string `json:"reason"`
	// RequestHash is the hex SHA-256 of the delivery's raw body.
	RequestHash string    `json:"request_hash"`
	ReceivedAt  time.Time `json:"received_at"`
}
