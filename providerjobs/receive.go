package providerjobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
)

// DropReason says why a delivery was not applied.
type DropReason string

// The reasons a delivery is dropped; none is an error.
const (
	// DropDuplicate: the delivery id is claimed for this body already,
	// completed or in flight.
	DropDuplicate DropReason = "duplicate"
	// DropHashMismatch: the delivery id is claimed for a different body.
	DropHashMismatch DropReason = "hash_mismatch"
	// DropUnknownJob: the path names no job of the provider; recorded
	// without an organization.
	DropUnknownJob DropReason = "unknown_job"
	// DropJobMismatch: the body names another provider job id than the
	// path's job; not landed, so it can still arrive on its own path.
	DropJobMismatch DropReason = "job_mismatch"
	// DropPathMismatch: a copy of a stored arrival came on another path of
	// the organization whose job the body also names.
	DropPathMismatch DropReason = "path_mismatch"
)

// ResourceType is the resource type a completed delivery claim stores; its
// id is the job's id.
const ResourceType = "provider_job"

// Observer counts drops by provider and reason, after they are recorded,
// and the inbox's work. It must be safe for concurrent use and must not
// block.
type Observer interface {
	ObserveDrop(provider, reason string)
	ObserveApplied(provider, by string)
	ObserveCopy(provider, reason string)
	ObserveAuditFailure(provider, reason string)
	ObserveInbox(pending int64, oldest time.Duration)
}

// NopObserver observes nothing. It is the default [Observer].
type NopObserver struct{}

func (NopObserver) ObserveDrop(string, string)         {}
func (NopObserver) ObserveApplied(string, string)      {}
func (NopObserver) ObserveCopy(string, string)         {}
func (NopObserver) ObserveAuditFailure(string, string) {}
func (NopObserver) ObserveInbox(int64, time.Duration)  {}

// Delivery is one authenticated callback of a provider.
type Delivery struct {
	Provider string
	// JobID is [Job.ID] as the path names it, unparsed.
	JobID string
	// DeliveryID is the provider's id of the delivery, the claim key.
	DeliveryID string
	Body       []byte
	Update     Update
}

// Update is the content of a delivery.
type Update struct {
	// ProviderJobID must match the path's job.
	ProviderJobID string
	// Status is running, succeeded or failed.
	Status Status
	// Result is a JSON object or nil; it replaces the job's result.
	Result json.RawMessage
}

// Outcome is the ending of a delivery; exactly one of Accepted, Queued and
// Reason is set.
type Outcome struct {
	// Queued reports that the delivery is landed but not yet applied;
	// acknowledging it is safe.
	Queued bool
	// Accepted reports that this call claimed and completed the delivery.
	Accepted bool
	// Applied reports that the job changed (Accepted only).
	Applied bool
	// Status is the job's status afterwards (Accepted only).
	Status Status
	Reason DropReason
	// JobID is nil for an unknown job.
	JobID uuid.UUID
}

// RequestHash returns the hex SHA-256 of a raw delivery body, not canonical:
// the signature covers these bytes.
func RequestHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// claimAnswer is the response a completed delivery claim stores.
type claimAnswer struct {
	Applied bool   `json:"applied"`
	Status  Status `json:"status,omitempty"`
	// Dropped is set when the job vanished with its Run before the apply.
	Dropped DropReason `json:"dropped,omitempty"`
}

// storable makes s fit PostgreSQL text: invalid UTF-8 and NUL become U+FFFD,
// cut to limit characters.
func storable(s string, limit int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit]) // exact: s is valid UTF-8 by now
	}
	return s
}

func (d Delivery) validate() error {
	if err := ValidateProvider(d.Provider); err != nil {
		return err
	}
	if err := idempotency.ValidateKey(d.DeliveryID); err != nil {
		return fmt.Errorf("%w: delivery id: %w", ErrInvalid, err)
	}
	switch {
	case d.Update.Status != StatusRunning && !d.Update.Status.Terminal(): // pending is set only by registration
		return fmt.Errorf("%w: status %q is not one a delivery reports (running, succeeded, failed)", ErrInvalid, d.Update.Status)
	case d.Update.ProviderJobID == "":
		return fmt.Errorf("%w: the body names no job", ErrInvalid)
	case d.Update.Result != nil && !isJSONObject(d.Update.Result):
		return fmt.Errorf("%w: result is not a JSON object", ErrInvalid)
	}
	return nil
}

func isJSONObject(b json.RawMessage) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(b)
}
