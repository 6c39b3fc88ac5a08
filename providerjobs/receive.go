package providerjobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	// DropUnknownJob: the path names no job of the provider on this
	// platform: its job id is not a UUID, or no job of the provider has
	// it (including a job registered for another provider, and one that
	// went with its Run).
	DropUnknownJob DropReason = "unknown_job"
	// DropJobMismatch: the body names a different provider job id than
	// the one registered for the job the path names.
	DropJobMismatch DropReason = "job_mismatch"
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

// NopObserver observes nothing. It is the default [Observer].
type NopObserver struct{}

// ObserveDrop does nothing.
func (NopObserver) ObserveDrop(string, string) {}

// Delivery is one callback of a provider, authenticated by the caller.
type Delivery struct {
	// Provider is the provider that signed the delivery; see
	// [ValidateProvider].
	Provider string
	// JobID is searchd's id of the job ([Job.ID]) as the request path
	// names it, unparsed: one that is not a UUID names no job, and is
	// recorded as received (made storable) when the delivery drops.
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
	// ProviderJobID is the provider's id of the job the body names; it
	// must equal the [Job.ProviderJobID] of the job the path names.
	ProviderJobID string
	// Status is running, succeeded or failed.
	Status Status
	// Result is a JSON object, or nil for none. The job's result is set to
	// it, nil included.
	Result json.RawMessage
}

// Outcome is the ending of a delivery. Exactly one of Accepted and Reason
// is set.
type Outcome struct {
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

// errFenceLost reports a completion the plane refused because another
// worker took the claim over after its lease passed.
var errFenceLost = errors.New("providerjobs: claim fence lost")

// Receive processes a delivery the caller has authenticated, and answers
// how it ended: accepted, or dropped with a reason (see the package
// documentation for the order of the checks). A dropped delivery is
// recorded and observed before Receive returns.
//
// Errors: an error wrapping [ErrInvalid] for a delivery the caller should
// have refused (a provider or delivery id the validators refuse, a status
// a delivery cannot report, a result that is not an object), before any
// SQL runs. Any other error comes from the database and means nothing was
// applied: a claim this call held has been released, so the provider's
// redelivery is processed afresh.
func (s *Service) Receive(ctx context.Context, d Delivery) (Outcome, error) {
	if err := d.validate(); err != nil {
		return Outcome{}, err
	}
	hash := RequestHash(d.Body)
	jobID, err := uuid.Parse(d.JobID)
	if err != nil {
		// No job could have this id.
		return s.drop(ctx, s.db, d, hash, DropUnknownJob, uuid.Nil)
	}

	// The tenant first: the claim key is scoped to an organization, and
	// only the job knows which. The job is searchd's registration, which
	// only its organization knows the id of: the provider's job id could
	// be registered by any organization, so it must not pick the tenant.
	var org uuid.UUID
	var providerJobID string
	err = s.db.QueryRow(ctx, jobResolve, jobID, d.Provider).Scan(&org, &providerJobID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s.drop(ctx, s.db, d, hash, DropUnknownJob, uuid.Nil)
	case err != nil:
		return Outcome{}, fmt.Errorf("providerjobs: resolve job: %w", err)
	}
	if d.Update.ProviderJobID != providerJobID {
		out, err := s.drop(ctx, s.db, d, hash, DropJobMismatch, org)
		out.JobID = jobID
		return out, err
	}

	claimed, err := s.plane.Claim(ctx, org, Scope(d.Provider), d.DeliveryID, hash, idempotency.WebhookLease)
	if err != nil {
		return Outcome{}, fmt.Errorf("providerjobs: claim delivery: %w", err)
	}
	var out Outcome
	switch claimed.Kind {
	case idempotency.KindClaimed:
		return s.apply(ctx, d, hash, org, jobID, claimed.Claim)
	case idempotency.KindCompleted, idempotency.KindProcessing:
		// Completed: the provider redelivered a handled delivery.
		// Processing: a healthy worker is applying it now; a crashed one's
		// lease would have passed and this claim reclaimed it.
		out, err = s.drop(ctx, s.db, d, hash, DropDuplicate, org)
	case idempotency.KindConflict:
		out, err = s.drop(ctx, s.db, d, hash, DropHashMismatch, org)
	default:
		return Outcome{}, fmt.Errorf("providerjobs: claim answered %s", claimed.Kind)
	}
	out.JobID = jobID
	return out, err
}

// apply applies a claimed delivery and completes its claim in one
// transaction, so the job changes exactly when the claim records it.
func (s *Service) apply(ctx context.Context, d Delivery, hash string, org, jobID uuid.UUID, claim *idempotency.Claim) (Outcome, error) {
	var answer claimAnswer
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		answer = claimAnswer{}
		if s.cfg.beforeApply != nil {
			if err := s.cfg.beforeApply(ctx, tx); err != nil {
				return err
			}
		}
		var status string
		err := tx.QueryRow(ctx, jobApply, org, jobID, string(d.Update.Status), nullJSON(d.Update.Result), s.nowArg()).Scan(&status)
		switch {
		case err == nil:
			answer.Applied = true
		case errors.Is(err, pgx.ErrNoRows):
			// Terminal already: the job keeps its status.
			err = tx.QueryRow(ctx, jobStatus, org, jobID).Scan(&status)
			if errors.Is(err, pgx.ErrNoRows) {
				// Gone since the resolution, with its Run. The delivery
				// names a job this platform no longer holds.
				answer.Dropped = DropUnknownJob
				err = s.recordDrop(ctx, tx, d, hash, DropUnknownJob, org)
			}
		}
		if err != nil {
			return err
		}
		answer.Status = Status(status)
		c := idempotency.Completion{ResourceType: ResourceType, ResourceID: jobID.String()}
		if answer.Dropped != "" {
			c = idempotency.Completion{}
		}
		c.Response, err = json.Marshal(answer)
		if err != nil {
			return err
		}
		ok, err := s.plane.CompleteTx(ctx, tx, claim, c)
		if err != nil {
			return err
		}
		if !ok {
			return errFenceLost
		}
		return nil
	})
	switch {
	case err == nil && answer.Dropped != "":
		s.cfg.Observer.ObserveDrop(d.Provider, string(answer.Dropped))
		return Outcome{Reason: answer.Dropped, JobID: jobID}, nil
	case err == nil:
		return Outcome{Accepted: true, Applied: answer.Applied, Status: answer.Status, JobID: jobID}, nil
	case errors.Is(err, errFenceLost):
		// Our lease passed and another worker reclaimed the delivery: it
		// owns the effect now, and ours rolled back.
		out, err := s.drop(ctx, s.db, d, hash, DropDuplicate, org)
		out.JobID = jobID
		return out, err
	}
	// The release is fenced and conditional on the claim being unfinished,
	// so it is safe even when the commit went through and only its answer
	// was lost: it then deletes nothing, and the redelivery is a duplicate.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	if _, rerr := s.plane.Release(rctx, claim); rerr != nil {
		err = errors.Join(err, fmt.Errorf("release claim: %w", rerr))
	}
	return Outcome{}, fmt.Errorf("providerjobs: apply delivery: %w", err)
}

// dbtx is what recording a drop needs: the pool, or the delivery's
// transaction.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// drop records a dropped delivery on db, then observes it.
func (s *Service) drop(ctx context.Context, db dbtx, d Delivery, hash string, reason DropReason, org uuid.UUID) (Outcome, error) {
	if err := s.recordDrop(ctx, db, d, hash, reason, org); err != nil {
		return Outcome{}, err
	}
	s.cfg.Observer.ObserveDrop(d.Provider, string(reason))
	return Outcome{Reason: reason}, nil
}

func (s *Service) recordDrop(ctx context.Context, db dbtx, d Delivery, hash string, reason DropReason, org uuid.UUID) error {
	var orgArg any
	if org != uuid.Nil {
		orgArg = org
	}
	_, err := db.Exec(ctx, dropInsert, uuid.New(), d.Provider, storable(d.JobID, MaxJobIDLen),
		d.DeliveryID, hash, string(reason), orgArg, s.nowArg())
	if err != nil {
		return fmt.Errorf("providerjobs: record %s drop: %w", reason, err)
	}
	return nil
}

// storable returns s as PostgreSQL text can hold it, for the audit: invalid
// UTF-8 and NUL replaced by U+FFFD, cut to at most limit characters.
func storable(s string, limit int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	n := 0
	for i := range s {
		if n == limit {
			return s[:i]
		}
		n++
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

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}
