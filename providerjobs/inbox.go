package providerjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// InboxStatus is the state of an arrival in the inbox.
type InboxStatus string

// The states of an arrival: pending until stage two applied or dropped it.
const (
	InboxPending InboxStatus = "pending"
	InboxApplied InboxStatus = "applied"
	InboxDropped InboxStatus = "dropped"
)

// Who finished an arrival, in [InboxEntry.AppliedBy].
const (
	// ByHandler: the callback handler, right after it landed the arrival.
	ByHandler = "handler"
	// ByApplier: the background applier, after the handler's lease passed.
	ByApplier = "applier"
)

// InboxEntry is one arrival in agent.provider_inbox: a delivery as it
// first landed, and what stage two made of it.
type InboxEntry struct {
	ID         uuid.UUID
	Provider   string
	DeliveryID string
	// PathJobID is the {job_id} of the path the delivery first arrived on,
	// as received (made storable).
	PathJobID string
	// JobID and OrganizationID are the job the path resolved to when the
	// delivery landed, and its tenant; the nil UUID when it named none.
	JobID          uuid.UUID
	OrganizationID uuid.UUID
	RequestHash    string
	// Update is the parsed content of the body, which stage two applies.
	Update     Update
	ReceivedAt time.Time
	Status     InboxStatus
	// Reason is set for a dropped arrival.
	Reason DropReason
	// AppliedBy is ByHandler or ByApplier once the arrival is finished.
	AppliedBy  string
	FinishedAt *time.Time
	// LeaseExpiresAt is, while pending, when the worker applying it loses
	// it, or when its next attempt is due.
	LeaseExpiresAt time.Time
	Attempts       int
	// LastError is the error of the last failed attempt, while pending.
	LastError string
	// Copies counts the copies of the arrival that were dropped, by
	// reason. The [Audit]'s lists fill it; elsewhere it is zero.
	Copies Copies
}

// entryValue reads a row of inboxColumns, for pgx.CollectRows.
var entryValue = keyset.Value(func(r pgx.Row) (*InboxEntry, error) { return scanEntry(r) })

// scanEntry scans the inboxColumns of row, then into extra the columns
// that follow them.
func scanEntry(row pgx.Row, extra ...any) (*InboxEntry, error) {
	var e InboxEntry
	// A NULL job_id or organization_id scans as the nil UUID (uuid.UUID's
	// sql.Scanner).
	if err := row.Scan(append([]any{&e.ID, &e.Provider, &e.DeliveryID, &e.PathJobID, &e.JobID, &e.OrganizationID,
		&e.RequestHash, &e.Update.ProviderJobID, &e.Update.Status, &e.Update.Result, &e.ReceivedAt, &e.Status,
		&e.Reason, &e.AppliedBy, &e.FinishedAt, &e.LeaseExpiresAt, &e.Attempts, &e.LastError}, extra...)...); err != nil {
		return nil, err
	}
	return &e, nil
}

// Receive processes a delivery the caller has authenticated, in the stages
// the package documentation describes, and answers how it ended. Nothing is
// acknowledged before the arrival (or the drop of a delivery that is not
// landed) is committed. When the fast path's apply fails, or meets another
// worker's claim, the arrival stays pending and the outcome is
// [Outcome.Queued]: the applier of some replica applies it once the
// handler's lease passes.
//
// Errors: an error wrapping [ErrInvalid] for a delivery the caller should
// have refused, before any SQL runs; any other error comes from the
// database and means the delivery was not stored, and the provider must
// redeliver.
func (s *Service) Receive(ctx context.Context, d Delivery) (_ Outcome, err error) {
	defer dberr.Annotate(&err)
	if err := d.validate(); err != nil {
		return Outcome{}, err
	}
	org, jobID, providerJobID, err := s.resolve(ctx, d.Provider, d.JobID)
	if err != nil {
		return Outcome{}, err
	}
	switch {
	case jobID == uuid.Nil:
		return s.refuse(ctx, d, DropUnknownJob, uuid.Nil, uuid.Nil)
	case d.Update.ProviderJobID != providerJobID:
		return s.refuse(ctx, d, DropJobMismatch, org, jobID)
	}
	e, fresh, err := s.land(ctx, d, org, jobID)
	if err != nil {
		return Outcome{}, err
	}
	if !fresh {
		return s.copied(ctx, e, d), nil
	}
	// The arrival is durable: from here on every ending is an
	// acknowledgement. The apply runs on a context detached from the
	// request's, bounded by the lease: a provider that hangs up early
	// does not cut the apply short and leave it to the applier.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ApplyTimeout)
	defer cancel()
	out, err := s.applyEntry(actx, e, ByHandler)
	if err != nil {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "providerjobs: apply failed; the arrival is queued for the applier",
			slog.String("provider", e.Provider), slog.String("delivery_id", e.DeliveryID), slog.String("error", err.Error()))
		s.retryLater(actx, e, s.backoff(e.Attempts), err)
		return Outcome{Queued: true, JobID: e.JobID}, nil
	}
	return out, nil
}

// resolve returns the job the callback path's {job_id} (pathJobID,
// unparsed) names under provider, its organization and the provider job
// id it was registered under, through the directory: one lookup by the
// job's id, which a cluster answers from the coordinator's copy. The nil
// UUIDs when the path names no job of the provider: not searchd's id of
// a job in its canonical form (the form callback paths are handed out
// in), or of none.
//
// The path decides the job, not the body: a provider job id may name a job
// in several organizations, and only the path, which only the job's
// organization learns, tells them apart. The body must then name the
// path's job too (the caller's check), so neither alone can steer a
// delivery to another job.
func (s *Service) resolve(ctx context.Context, provider, pathJobID string) (org, jobID uuid.UUID, providerJobID string, err error) {
	id, err := uuid.Parse(pathJobID)
	if err != nil || id.String() != pathJobID {
		return uuid.Nil, uuid.Nil, "", nil
	}
	err = s.db.QueryRow(ctx, directoryResolve, id, provider).Scan(&org, &providerJobID)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, uuid.Nil, "", nil
	}
	if err != nil {
		return uuid.Nil, uuid.Nil, "", fmt.Errorf("providerjobs: resolve the job: %w", err)
	}
	return org, id, providerJobID, nil
}

// refuse drops a delivery that is not landed (its path names no job of
// the provider, or its body names another job than its path's): its drop is
// its only record, written once per delivery and reason, so its failure is
// an error and the provider redelivers.
func (s *Service) refuse(ctx context.Context, d Delivery, reason DropReason, org, jobID uuid.UUID) (Outcome, error) {
	if err := s.recordDrop(ctx, d.Provider, d.JobID, d.DeliveryID, RequestHash(d.Body), reason, org, jobID); err != nil {
		return Outcome{}, err
	}
	s.cfg.Observer.ObserveDrop(d.Provider, string(reason))
	return Outcome{Reason: reason, JobID: jobID}, nil
}

// land stores the arrival of d, which resolved to job jobID of org, and
// reports whether this call inserted it; otherwise it returns the stored
// arrival. The stored arrival is read first: a read waits for no lock, so
// a copy is answered at once even while a stalled worker holds the
// arrival's row inside its apply.
func (s *Service) land(ctx context.Context, d Delivery, org, jobID uuid.UUID) (*InboxEntry, bool, error) {
	e, err := scanEntry(s.db.QueryRow(ctx, inboxGet, org, d.Provider, d.DeliveryID))
	switch {
	case err == nil:
		return e, false, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, false, fmt.Errorf("providerjobs: read the inbox: %w", err)
	}
	e, err = scanEntry(s.db.QueryRow(ctx, inboxInsert, pgx.StrictNamedArgs{
		"id": ids.New(), "provider": d.Provider, "delivery_id": d.DeliveryID,
		"path_job_id": storable(d.JobID, MaxJobIDLen), "job_id": jobID, "org": org,
		"request_hash": RequestHash(d.Body), "body_job_id": d.Update.ProviderJobID,
		"body_status": string(d.Update.Status), "body_result": sqlarg.JSON(d.Update.Result),
		"lease_us": s.cfg.Lease.Microseconds(), "now": s.nowArg(),
	}))
	switch {
	case err == nil:
		return e, true, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, false, fmt.Errorf("providerjobs: land the delivery: %w", err)
	}
	// Landed by a concurrent copy between the read and the insert.
	e, err = scanEntry(s.db.QueryRow(ctx, inboxGet, org, d.Provider, d.DeliveryID))
	if err != nil {
		return nil, false, fmt.Errorf("providerjobs: read the inbox after a conflict: %w", err)
	}
	return e, false, nil
}

// copied answers a copy of the stored arrival e: dropped for its reason,
// counted on the arrival, written to the drop audit once per reason and
// arrival. The request hash is compared first: a different body is a
// hash_mismatch whatever its path. Counting and the audit never decide the
// answer: the arrival is durable, and a failure to record a copy is logged
// and counted, never a 5xx.
func (s *Service) copied(ctx context.Context, e *InboxEntry, d Delivery) Outcome {
	hash := RequestHash(d.Body)
	reason := DropDuplicate
	switch {
	case e.RequestHash != hash:
		reason = DropHashMismatch
	case e.PathJobID != storable(d.JobID, MaxJobIDLen):
		// The copy came on another path of the organization whose job
		// its body names too: the arrival's job went (with its Run) and
		// the organization registered the pair again since.
		reason = DropPathMismatch
	}
	s.observer.ObserveCopy(d.Provider, string(reason))
	s.cfg.Observer.ObserveDrop(d.Provider, string(reason))
	// inboxCopy adds one to the counter of reason and returns the three,
	// in this order.
	i := slices.Index([]DropReason{DropDuplicate, DropHashMismatch, DropPathMismatch}, reason)
	var add, n [3]int64
	add[i] = 1
	err := s.db.QueryRow(ctx, inboxCopy, e.OrganizationID, e.ID, add[0], add[1], add[2], s.nowArg()).Scan(&n[0], &n[1], &n[2])
	switch {
	case err != nil:
		s.auditFailed(ctx, d.Provider, d.DeliveryID, reason, fmt.Errorf("count the copy: %w", err))
	case n[i] == 1:
		// The first copy of its reason: the audit gets a row, the next
		// copies are counted alone.
		if err := s.recordDrop(ctx, d.Provider, d.JobID, d.DeliveryID, hash, reason, e.OrganizationID, e.JobID); err != nil {
			s.auditFailed(ctx, d.Provider, d.DeliveryID, reason, err)
		}
	}
	if e.Status == InboxPending && !e.LeaseExpiresAt.After(s.plane.Clock().Now()) && s.cfg.Wake != nil {
		// The arrival's worker is gone (by the plane's clock: the stub in
		// tests): the applier need not wait for its next poll.
		s.cfg.Wake()
	}
	return Outcome{Reason: reason, JobID: e.JobID}
}

// auditFailed logs and counts a drop the audit could not record. The
// acknowledgement never depends on the audit.
func (s *Service) auditFailed(ctx context.Context, provider, deliveryID string, reason DropReason, err error) {
	s.observer.ObserveAuditFailure(provider, string(reason))
	s.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "providerjobs: the drop audit could not record a drop; the delivery was acknowledged",
		slog.String("provider", provider), slog.String("delivery_id", deliveryID),
		slog.String("reason", string(reason)), slog.String("error", err.Error()))
}

// errFenceLost reports a completion the plane refused because another
// worker took the claim over after its lease passed.
var errFenceLost = errors.New("providerjobs: claim fence lost")

// errFinished reports an arrival another worker finished first.
var errFinished = errors.New("providerjobs: arrival finished by another worker")

// errInFlight reports an arrival whose claim another worker holds, live.
type errInFlight struct{ retryAfter time.Duration }

func (e *errInFlight) Error() string {
	return fmt.Sprintf("providerjobs: another worker holds the delivery's claim; lease passes in %s", e.retryAfter)
}

// applyEntry is stage two: it applies the pending arrival e through the
// plane, or drops it with its reason, and finishes the arrival in the same
// transaction as the effect. by is ByHandler or ByApplier. The arrival
// names its job and the job's organization: the delivery resolved to them
// before it landed, and a job that went since (with its Run) is found
// missing by the apply, which drops the delivery as [DropUnknownJob].
//
// It returns an error, and leaves e pending, when the database failed or
// another worker holds the delivery's claim live ([*errInFlight]); a claim
// this call held has been released then.
func (s *Service) applyEntry(ctx context.Context, e *InboxEntry, by string) (Outcome, error) {
	org, jobID := e.OrganizationID, e.JobID
	claimed, err := s.plane.Claim(ctx, org, Scope(e.Provider), e.DeliveryID, e.RequestHash, s.cfg.Lease)
	if err != nil {
		return Outcome{}, fmt.Errorf("providerjobs: claim delivery: %w", err)
	}
	switch claimed.Kind {
	case idempotency.KindClaimed:
		return s.apply(ctx, e, org, jobID, claimed.Claim, by)
	case idempotency.KindCompleted:
		// Applied already, by a worker that finished the claim but not the
		// arrival: one that ran before the inbox existed.
		return s.dropEntry(ctx, e, DropDuplicate, by)
	case idempotency.KindProcessing:
		return Outcome{}, &errInFlight{retryAfter: claimed.RetryAfter}
	case idempotency.KindConflict:
		return s.dropEntry(ctx, e, DropHashMismatch, by)
	}
	return Outcome{}, fmt.Errorf("providerjobs: claim answered %s", claimed.Kind)
}

// apply applies a claimed delivery, completes its claim and finishes its
// arrival in one transaction, so the job changes exactly when the claim and
// the inbox record it.
func (s *Service) apply(ctx context.Context, e *InboxEntry, org, jobID uuid.UUID, claim *idempotency.Claim, by string) (Outcome, error) {
	var answer claimAnswer
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) (err error) {
		answer, err = s.applyTx(ctx, tx, e, org, jobID, claim, by)
		return err
	})
	switch {
	case err == nil && answer.Dropped != "":
		s.dropped(ctx, e, answer.Dropped)
		return Outcome{Reason: answer.Dropped, JobID: jobID}, nil
	case err == nil:
		s.observer.ObserveApplied(e.Provider, by)
		return Outcome{Accepted: true, Applied: answer.Applied, Status: answer.Status, JobID: jobID}, nil
	case errors.Is(err, errFenceLost):
		// Our lease passed and another worker took the delivery over: it
		// owns the effect and the arrival now, and ours rolled back.
		s.dropped(ctx, e, DropDuplicate)
		return Outcome{Reason: DropDuplicate, JobID: jobID}, nil
	case errors.Is(err, errFinished):
		// Another worker finished the arrival (dropped it) while we held
		// the claim; ours rolled back, and the claim we hold must not be
		// left processing.
		_ = s.release(ctx, claim)
		s.cfg.Observer.ObserveDrop(e.Provider, string(DropDuplicate))
		return Outcome{Reason: DropDuplicate, JobID: jobID}, nil
	}
	// The release is fenced and conditional on the claim being unfinished,
	// so it is safe even when the commit went through and only its answer
	// was lost: it then deletes nothing, and the arrival is finished.
	if rerr := s.release(ctx, claim); rerr != nil {
		err = errors.Join(err, fmt.Errorf("release claim: %w", rerr))
	}
	return Outcome{}, fmt.Errorf("providerjobs: apply delivery: %w", err)
}

// applyTx is the transaction of [Service.apply]: it applies the update to
// the job (or reads the status of a job terminal already), completes the
// claim with the answer, and finishes the arrival. It returns errFenceLost
// when the claim's lease moved on, errFinished when another worker
// finished the arrival, or the database's error.
func (s *Service) applyTx(ctx context.Context, tx pgx.Tx, e *InboxEntry, org, jobID uuid.UUID, claim *idempotency.Claim, by string) (answer claimAnswer, err error) {
	if s.cfg.beforeApply != nil {
		if err := s.cfg.beforeApply(ctx, tx); err != nil {
			return answer, err
		}
	}
	var status string
	err = tx.QueryRow(ctx, jobApply, org, jobID, string(e.Update.Status), sqlarg.JSON(e.Update.Result), s.nowArg()).Scan(&status)
	switch {
	case err == nil:
		answer.Applied = true
	case errors.Is(err, pgx.ErrNoRows):
		// Terminal already: the job keeps its status.
		err = tx.QueryRow(ctx, jobStatus, org, jobID).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			// Gone since the resolution, with its Run.
			answer.Dropped, err = DropUnknownJob, nil
		}
	}
	if err != nil {
		return answer, err
	}
	answer.Status = Status(status)
	c := idempotency.Completion{ResourceType: ResourceType, ResourceID: jobID.String()}
	finished, reason := InboxApplied, any(nil)
	if answer.Dropped != "" {
		c = idempotency.Completion{}
		finished, reason = InboxDropped, any(string(answer.Dropped))
	}
	if c.Response, err = json.Marshal(answer); err != nil {
		return answer, err
	}
	ok, err := s.plane.CompleteTx(ctx, tx, claim, c)
	if err != nil {
		return answer, err
	}
	if !ok {
		return answer, errFenceLost
	}
	tag, err := tx.Exec(ctx, inboxFinish, e.OrganizationID, e.ID, string(finished), reason, by, s.nowArg())
	if err != nil {
		return answer, err
	}
	if tag.RowsAffected() != 1 {
		return answer, errFinished
	}
	return answer, nil
}

// release releases claim after a failure, on a context detached from
// ctx (which may be the very reason of the failure) and bounded by
// ReleaseTimeout.
func (s *Service) release(ctx context.Context, claim *idempotency.Claim) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	_, err := s.plane.Release(ctx, claim)
	return err
}

// dropEntry finishes the pending arrival e as dropped for reason and
// records the drop. When another worker finished it first, it answers what
// that worker made of it.
func (s *Service) dropEntry(ctx context.Context, e *InboxEntry, reason DropReason, by string) (Outcome, error) {
	tag, err := s.db.Exec(ctx, inboxFinish, e.OrganizationID, e.ID, string(InboxDropped), string(reason), by, s.nowArg())
	if err != nil {
		return Outcome{}, fmt.Errorf("providerjobs: finish the arrival: %w", err)
	}
	if tag.RowsAffected() == 0 {
		s.cfg.Observer.ObserveDrop(e.Provider, string(DropDuplicate))
		return Outcome{Reason: DropDuplicate, JobID: e.JobID}, nil
	}
	s.dropped(ctx, e, reason)
	return Outcome{Reason: reason, JobID: e.JobID}, nil
}

// dropped writes the drop of the arrival e to the audit and counts it. The
// arrival records its reason durably already; a failed audit write is
// logged and counted.
func (s *Service) dropped(ctx context.Context, e *InboxEntry, reason DropReason) {
	if err := s.recordDrop(ctx, e.Provider, e.PathJobID, e.DeliveryID, e.RequestHash, reason, e.OrganizationID, e.JobID); err != nil {
		s.auditFailed(ctx, e.Provider, e.DeliveryID, reason, err)
	}
	s.cfg.Observer.ObserveDrop(e.Provider, string(reason))
}

// recordDrop writes a drop to the audit, under the organization and the
// job the delivery named: none for unknown_job.
func (s *Service) recordDrop(ctx context.Context, provider, pathJobID, deliveryID, hash string, reason DropReason, org, jobID uuid.UUID) error {
	if s.cfg.beforeAudit != nil {
		if err := s.cfg.beforeAudit(); err != nil {
			return err
		}
	}
	var orgArg, jobArg any
	if org != uuid.Nil && jobID != uuid.Nil && reason != DropUnknownJob {
		orgArg, jobArg = org, jobID
	}
	_, err := s.db.Exec(ctx, dropInsert, pgx.StrictNamedArgs{
		"id": ids.New(), "provider": provider, "path_job_id": storable(pathJobID, MaxJobIDLen),
		"delivery_id": deliveryID, "request_hash": hash, "reason": string(reason), "org": orgArg,
		"job_id": jobArg, "now": s.nowArg(),
	})
	if err != nil {
		return fmt.Errorf("providerjobs: record %s drop: %w", reason, err)
	}
	return nil
}

// retryLater sets the next attempt of the pending arrival e after delay,
// recording cause. Best effort: when it fails the arrival keeps the lease
// it has, and the applier takes it when that passes.
func (s *Service) retryLater(ctx context.Context, e *InboxEntry, delay time.Duration, cause error) {
	var inFlight *errInFlight
	if errors.As(cause, &inFlight) {
		// Another worker holds the claim: try again when its lease passes.
		delay = inFlight.retryAfter + 10*time.Millisecond
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	if _, err := s.db.Exec(rctx, inboxRetry, e.OrganizationID, e.ID, delay.Microseconds(), cause.Error(), s.nowArg()); err != nil {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "providerjobs: could not schedule the retry of an arrival; the applier takes it when its lease passes",
			slog.String("provider", e.Provider), slog.String("delivery_id", e.DeliveryID), slog.String("error", err.Error()))
	}
}

// backoff returns the wait before the next attempt of an arrival whose
// attempt number attempts failed: doubling from a second, at most
// MaxBackoff.
func (s *Service) backoff(attempts int) time.Duration {
	// 2^33 s is the largest power of two a time.Duration holds.
	return min(time.Second<<min(max(attempts-1, 0), 33), s.cfg.MaxBackoff)
}

// FindArrivals returns the arrivals of a delivery id in every
// organization, oldest first (an operator's look-up; each organization's
// job has its own), and an empty slice when there are none.
func (s *Service) FindArrivals(ctx context.Context, provider, deliveryID string) (_ []InboxEntry, err error) {
	defer dberr.Annotate(&err)
	rows, _ := s.db.Query(ctx, inboxFind, provider, deliveryID)
	out, err := pgx.CollectRows(rows, entryValue)
	if err != nil {
		return nil, fmt.Errorf("providerjobs: find arrivals: %w", err)
	}
	return out, nil
}

// Copies is what the copies of one arrival were dropped for.
type Copies struct {
	Duplicates, HashMismatches, PathMismatches int64
	// LastAt is when the last copy arrived; nil when none did.
	LastAt *time.Time
}

// ArrivalCopies returns the copy counters of the arrival id of org.
func (s *Service) ArrivalCopies(ctx context.Context, org, id uuid.UUID) (_ Copies, err error) {
	defer dberr.Annotate(&err)
	var c Copies
	if err := s.db.QueryRow(ctx, inboxCopies, org, id).Scan(&c.Duplicates, &c.HashMismatches, &c.PathMismatches, &c.LastAt); err != nil {
		return Copies{}, fmt.Errorf("providerjobs: read the copies: %w", err)
	}
	return c, nil
}

// ListArrivalsParams filter [Service.ListArrivals].
type ListArrivalsParams struct {
	// Provider and Status, when set, keep the arrivals that have them.
	Provider string
	Status   InboxStatus
	// Limit is the most arrivals returned, 1 to 1000. Default 50.
	Limit int
}

// ListArrivals returns arrivals newest first. It returns an error wrapping
// [ErrInvalid] for a limit out of range or an unknown status, before any
// SQL runs.
func (s *Service) ListArrivals(ctx context.Context, p ListArrivalsParams) (_ []InboxEntry, err error) {
	defer dberr.Annotate(&err)
	if p.Limit == 0 {
		p.Limit = 50
	}
	if p.Limit < 1 || p.Limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d: must be 1 to 1000", ErrInvalid, p.Limit)
	}
	if err := checkInboxStatus(p.Status); err != nil {
		return nil, err
	}
	rows, _ := s.db.Query(ctx, inboxList, sqlarg.Null(p.Provider), sqlarg.Null(string(p.Status)), p.Limit)
	out, err := pgx.CollectRows(rows, entryValue)
	if err != nil {
		return nil, fmt.Errorf("providerjobs: list the inbox: %w", err)
	}
	return out, nil
}

// checkInboxStatus returns an error wrapping [ErrInvalid] unless s is an
// inbox status or "" (any).
func checkInboxStatus(s InboxStatus) error {
	switch s {
	case "", InboxPending, InboxApplied, InboxDropped:
		return nil
	}
	return fmt.Errorf("%w: status %q: must be pending, applied or dropped", ErrInvalid, s)
}
