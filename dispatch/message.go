package dispatch

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/outbound"
)

// MessageType is the type of every delivery: a Run was admitted and is
// handed to the runtime.
const MessageType = "run.admitted"

// Message is the body of a delivery, a Standard Webhooks message. It holds
// only what never changes about a Run (its timestamp is the admission), so
// every redelivery is the same bytes.
type Message = outbound.Message[MessageData]

// MessageData is what the runtime needs to execute and report on a Run.
type MessageData struct {
	Run MessageRun `json:"run"`
	// Snapshot is a saved-search Run's frozen input; nil for a direct Run,
	// whose input is Run.Input.
	Snapshot *MessageSnapshot `json:"snapshot"`
	// StatusURL is the path, relative to searchd's base URL, of the Run's
	// status reports.
	StatusURL string `json:"status_url"`
}

// MessageRun holds the fields of the API's Run that never change.
type MessageRun struct {
	ID             uuid.UUID       `json:"id"`
	OrganizationID uuid.UUID       `json:"organization_id"`
	Kind           string          `json:"kind"`
	Name           *string         `json:"name"`
	SavedSearchID  *uuid.UUID      `json:"saved_search_id"`
	SnapshotID     *uuid.UUID      `json:"snapshot_id"`
	Options        json.RawMessage `json:"options"`
	Input          json.RawMessage `json:"input"`
	CreatedBy      *string         `json:"created_by"`
	CreatedAt      time.Time       `json:"created_at"`
	IdempotencyKey string          `json:"idempotency_key"`
}

// MessageSnapshot is a saved-search Run's snapshot as GET
// /v1/snapshots/{id} answers it, less organization_id.
type MessageSnapshot struct {
	ID                 uuid.UUID       `json:"id"`
	SavedSearchID      uuid.UUID       `json:"saved_search_id"`
	SavedSearchVersion int64           `json:"saved_search_version"`
	Brief              json.RawMessage `json:"brief"`
	Baseline           json.RawMessage `json:"baseline"`
	ContentHash        string          `json:"content_hash"`
	CreatedBy          *string         `json:"created_by"`
	CreatedAt          time.Time       `json:"created_at"`
}

// CancelMessageType is the type of a cancel request: the runtime should
// stop the Run.
const CancelMessageType = "run.cancel_requested"

// CancelMessage is the body of a cancel request; its timestamp is when
// the cancel was asked for, so every redelivery is the same bytes.
type CancelMessage = outbound.Message[CancelMessageData]

// CancelMessageData names the Run to stop and where to report it.
type CancelMessageData struct {
	Run CancelMessageRun `json:"run"`
	// Reason is the canceller's, or nil.
	Reason *string `json:"reason"`
	// StatusURL is where the runtime reports the Run cancelled (PUT).
	StatusURL string `json:"status_url"`
}

// CancelMessageRun identifies the Run of a cancel request.
type CancelMessageRun struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
}

// CancelMessageID returns the webhook-id of Run runID's cancel request,
// distinct from the Run's own delivery.
func CancelMessageID(runID uuid.UUID) string { return "cancel_" + runID.String() }

// StatusPath returns the path of Run runID's status reports.
func StatusPath(runID uuid.UUID) string { return "/v1/runs/" + runID.String() + "/status" }
