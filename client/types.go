package client

import "time"

// The bodies of the API are generated from api/openapi.json into
// types.gen.go (make client-types): the same snake_case JSON names, ids as
// the UUID strings the API writes, times as RFC 3339. Unknown fields in
// answers are ignored, so a newer server does not break an older client.
// What follows is the client's own: query parameters, call results and
// the names of the API's values.

// CreateSavedSearchParams are the body of [Client.CreateSavedSearch].
type CreateSavedSearchParams = SavedSearchCreate

// RegisterProviderJobParams are the body of [Client.RegisterProviderJob].
type RegisterProviderJobParams = ProviderJobCreate

// RunCancel is the body of a cancel request a runtime receives.
type RunCancel = RunCancelRequest

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

// Page is a page of a list.
type Page[T any] struct {
	Items []T `json:"items"`
	// NextCursor fetches the next page; empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// SavedSearchPage is a page of saved-search summaries, newest first.
type SavedSearchPage = Page[SavedSearchSummary]

// RunPage is a page of Run list items, newest first.
type RunPage = Page[RunListItem]

// SnapshotPage is a page of a saved search's snapshots, newest first.
type SnapshotPage = Page[SnapshotListItem]

// Kinds of Run.
const (
	KindSavedSearch = "saved_search"
	KindCapability  = "capability"
	KindDefinition  = "definition"
)

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
