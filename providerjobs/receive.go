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

// DropReason says why a delivery was dropped rather than applied.
type DropReason string

// The reasons a delivery is dropped. Each is recorded in
// agent.webhook_drops and counted; none is an error.
const (
	// DropDuplicate: the delivery id is claimed for this body already, and
	// the claim is completed (the provider redelivered a handled delivery)
	// or held by a live worker (the effect is in flight).
	DropDuplicate DropReason = "duplicate"
	// DropHashMismatch: the delivery id is claimed for a different body.
	// The key already answers for other content, so applying this body
	// would be unsafe, and calling it a duplicate would be false.
	DropHashMismatch DropReason = "hash_mismatch"
	// DropUnknownJob: the callback path names no job of the provider on
	// this platform (it is not searchd's id of a job in canonical form,
	// the job is another provider's, or it went with its Run). Recorded
	// without an organization.
	DropUnknownJob DropReason = "unknown_job"
	// DropJobMismatch: the body names another provider job id than the
	// job its callback path names was registered under. Recorded under the
	// path's job and its organization, and never landed, so the delivery
	// posted to its own job's path afterwards is applied.
	DropJobMismatch DropReason = "job_mismatch"
	// DropPathMismatch: a copy of a stored arrival came on another path of
	// the organization than the arrival, one whose job the body names too:
	// the arrival's job went with its Run and the organization registered
	// the pair again since. Before migration 00015 it was how a delivery
	// re-posted to another organization's path was refused.
	DropPathMismatch DropReason = "path_mismatch"
)

// ResourceType names the resource a completed delivery claim stores: its
// resource id is the job's id.
const ResourceType = "provider_job"

// Observer is told about every drop, after it is recorded, so a metrics
// backend can count drops by provider and reason. Provider is always a
// configured provider, so its values are few. Implementations must be safe
// for concurrent use and must not block.
type Observer interface {
	ObserveDrop(provider, reason string)
}

// InboxObserver is told about the inbox, when the [Observer] given in
// [Config] has these methods too: arrivals applied (by ByHandler or
// ByApplier), copies counted by reason, drops the audit failed to record,
// and, at every poll of the applier, the pending arrivals and the age of
// the oldest. Implementations must be safe for concurrent use and must not
// block.
type InboxObserver interface {
	ObserveApplied(provider, by string)
	ObserveCopy(provider, reason string)
	ObserveAuditFailure(provider, reason string)
	ObserveInbox(pending int64, oldest time.Duration)
}

// NopObserver observes nothing: its methods do nothing. It is the default
// [Observer].
type NopObserver struct{}

func (NopObserver) ObserveDrop(string, string)         {}
func (NopObserver) ObserveApplied(string, string)      {}
func (NopObserver) ObserveCopy(string, string)         {}
func (NopObserver) ObserveAuditFailure(string, string) {}
func (NopObserver) ObserveInbox(int64, time.Duration)  {}

// Delivery is one callback of a provider, authenticated by the caller.
type Delivery struct {
	// Provider is the provider that signed the delivery; see
	// [ValidateProvider].
	Provider string
	// JobID is searchd's id of the job ([Job.ID]) as the request path
	// names it, unparsed: the delivery is about that job, whose provider
	// job id the body must name, and it is recorded as received (made
	// storable) when the delivery drops.
	JobID string
	// DeliveryID is the provider's id of this delivery, the claim key: 1 to
	// 255 bytes of UTF-8 without control characters.
	DeliveryID string
	// Body is the raw body, whose hex SHA-256 is the claim's request hash.
	Body []byte
	// Update is what Body says.
	Update Update
}

// Update is the content of a delivery.
type Update struct {
	// ProviderJobID is the provider's id of the job the body names: it
	// must be the one the path's job was registered under.
	ProviderJobID string
	// Status is running, succeeded or failed.
	Status Status
	// Result is a JSON object, or nil for none. The job's result is set to
	// it, nil included.
	Result json.RawMessage
}

// Outcome is the ending of a delivery. Exactly one of Accepted, Queued and
// Reason is set.
type Outcome struct {
	// Queued reports that the delivery is stored in the inbox and not yet
	// applied: its apply right after the landing failed or met another
	// worker's claim. The applier applies (or drops) it once; the
	// acknowledgement is as safe as for an applied one.
	Queued bool
	// Accepted reports that this call claimed the delivery and completed
	// its claim: the update was applied, or found the job already in a
	// terminal status and left it there.
	Accepted bool
	// Applied reports that the job changed (accepted alone).
	Applied bool
	// Status is the job's status after the delivery (accepted alone).
	Status Status
	// Reason says why the delivery was dropped (dropped alone).
	Reason DropReason
	// JobID is the id of the job the delivery resolved to; the nil UUID
	// for an unknown job.
	JobID uuid.UUID
}

// RequestHash returns the claim request hash of a delivery body: the hex
// SHA-256 of its raw bytes. The raw bytes, not a canonical form: the
// signature covers exactly these bytes, and a provider that re-sends one
// delivery id re-sends the same bytes.
func RequestHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// claimAnswer is the response a completed delivery claim stores.
type claimAnswer struct {
	Applied bool   `json:"applied"`
	Status  Status `json:"status,omitempty"`
	// Dropped is set when the job disappeared between the resolution and
	// the apply (its Run was deleted).
	Dropped DropReason `json:"dropped,omitempty"`
}

// storable returns s as PostgreSQL text can hold it, for the audit: invalid
// UTF-8 and NUL replaced by U+FFFD, cut to at most limit characters.
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
	case !d.Update.Status.reported():
		return fmt.Errorf("%w: status %q is not one a delivery reports (running, succeeded, failed)", ErrInvalid, d.Update.Status)
	case d.Update.ProviderJobID == "":
		return fmt.Errorf("%w: the body names no job", ErrInvalid)
	case d.Update.Result != nil && !isJSONObject(d.Update.Result):
		return fmt.Errorf("%w: result is not a JSON object", ErrInvalid)
	}
	return nil
}

// isJSONObject reports whether b is valid JSON whose top value is an object.
func isJSONObject(b json.RawMessage) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(b)
}
