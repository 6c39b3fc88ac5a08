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

// The states of an arrival: pending until applied or dropped.
const (
	InboxPending InboxStatus = "pending"
	InboxApplied InboxStatus = "applied"
	InboxDropped InboxStatus = "dropped"
)

// Who finished an arrival, in [InboxEntry.AppliedBy].
const (
	// ByHandler: the callback handler, right after landing.
	ByHandler = "handler"
	// ByApplier: the background applier, after the handler's lease passed.
	ByApplier = "applier"
)

// InboxEntry is one arrival in agent.provider_inbox.
type InboxEntry struct {
	ID         uuid.UUID
	Provider   string
	DeliveryID string
	PathJobID  string
	// JobID and OrganizationID are nil UUIDs when the path named no job.
	JobID          uuid.UUID
	OrganizationID uuid.UUID
	RequestHash    string
	Update         Update
	ReceivedAt     time.Time
	Status         InboxStatus
	Reason         DropReason
	AppliedBy      string
	FinishedAt     *time.Time
	// LeaseExpiresAt is, while pending, when the current worker loses the
	// arrival or the next attempt is due.
	LeaseExpiresAt time.Time
	Attempts       int
	LastError      string
	// Copies is set only by the [Audit] lists.
	Copies Copies
}

func scanEntry(row pgx.Row, extra ...any) (*InboxEntry, error) {
	var e InboxEntry
	// NULL job_id and organization_id scan as the nil UUID.
	if err := row.Scan(append([]any{&e.ID, &e.Provider, &e.DeliveryID, &e.PathJobID, &e.JobID, &e.OrganizationID,
		&e.RequestHash, &e.Update.ProviderJobID, &e.Update.Status, &e.Update.Result, &e.ReceivedAt, &e.Status,
		&e.Reason, &e.AppliedBy, &e.FinishedAt, &e.LeaseExpiresAt, &e.Attempts, &e.LastError}, extra...)...); err != nil {
		return nil, err
	}
	return &e, nil
}

// Receive lands and applies an authenticated delivery and reports how it
// ended; nothing is acknowledged before the arrival (or an unlanded drop) is
// committed. If the immediate apply fails or meets another worker's claim,
// the outcome is [Outcome.Queued]. Errors: [ErrInvalid] for input the caller
// should have refused; any other error means nothing was stored and the
// provider must redeliver.
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
	// The arrival is durable, so every ending from here is acknowledged;
	// the apply is detached so a provider hanging up does not cut it short.
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

// resolve returns the organization, job and provider job id the path's
// {job_id} names under provider; nil UUIDs when none. The path decides the
// job; the caller checks that the body names the same one.
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

// refuse records the drop of an unlanded delivery; the drop is its only
// record, so a failed write is an error and the provider redelivers.
func (s *Service) refuse(ctx context.Context, d Delivery, reason DropReason, org, jobID uuid.UUID) (Outcome, error) {
	if err := s.recordDrop(ctx, d.Provider, d.JobID, d.DeliveryID, RequestHash(d.Body), reason, org, jobID); err != nil {
		return Outcome{}, err
	}
	s.cfg.Observer.ObserveDrop(d.Provider, string(reason))
	return Outcome{Reason: reason, JobID: jobID}, nil
}

// land stores d's arrival, or returns the stored one with false. It reads
// first: a read waits for no lock even while a stalled worker holds the row.
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
	// Landed by a concurrent copy.
	e, err = scanEntry(s.db.QueryRow(ctx, inboxGet, org, d.Provider, d.DeliveryID))
	if err != nil {
		return nil, false, fmt.Errorf("providerjobs: read the inbox after a conflict: %w", err)
	}
	return e, false, nil
}

// copied answers a copy of the stored arrival e: it compares the hash, counts
// the copy, and audits the first copy of each reason. Failures are logged.
func (s *Service) copied(ctx context.Context, e *InboxEntry, d Delivery) Outcome {
	hash := RequestHash(d.Body)
	reason := DropDuplicate
	switch {
	case e.RequestHash != hash:
		reason = DropHashMismatch
	case e.PathJobID != storable(d.JobID, MaxJobIDLen):
		// Another path whose job the body also names: the arrival's job
		// went with its Run and the pair was registered again.
		reason = DropPathMismatch
	}
	s.cfg.Observer.ObserveCopy(d.Provider, string(reason))
	s.cfg.Observer.ObserveDrop(d.Provider, string(reason))
	// inboxCopy returns the three counters in this order.
	i := slices.Index([]DropReason{DropDuplicate, DropHashMismatch, DropPathMismatch}, reason)
	var add, n [3]int64
	add[i] = 1
	err := s.db.QueryRow(ctx, inboxCopy, e.OrganizationID, e.ID, add[0], add[1], add[2], s.nowArg()).Scan(&n[0], &n[1], &n[2])
	switch {
	case err != nil:
		s.auditFailed(ctx, d.Provider, d.DeliveryID, reason, fmt.Errorf("count the copy: %w", err))
	case n[i] == 1:
		// First copy of this reason: audit it; later ones are only counted.
		if err := s.recordDrop(ctx, d.Provider, d.JobID, d.DeliveryID, hash, reason, e.OrganizationID, e.JobID); err != nil {
			s.auditFailed(ctx, d.Provider, d.DeliveryID, reason, err)
		}
	}
	if e.Status == InboxPending && !e.LeaseExpiresAt.After(s.plane.Clock().Now()) && s.cfg.Wake != nil {
		// The arrival's worker is gone: wake the applier now.
		s.cfg.Wake()
	}
	return Outcome{Reason: reason, JobID: e.JobID}
}

func (s *Service) auditFailed(ctx context.Context, provider, deliveryID string, reason DropReason, err error) {
	s.cfg.Observer.ObserveAuditFailure(provider, string(reason))
	s.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "providerjobs: the drop audit could not record a drop; the delivery was acknowledged",
		slog.String("provider", provider), slog.String("delivery_id", deliveryID),
		slog.String("reason", string(reason)), slog.String("error", err.Error()))
}

var errFenceLost = errors.New("providerjobs: claim fence lost")

var errFinished = errors.New("providerjobs: arrival finished by another worker")

// errInFlight reports an arrival whose claim another worker holds live.
type errInFlight struct{ retryAfter time.Duration }

func (e *errInFlight) Error() string {
	return fmt.Sprintf("providerjobs: another worker holds the delivery's claim; lease passes in %s", e.retryAfter)
}

// applyEntry applies the pending arrival e through a claim, or drops it (a
// job gone since landing is [DropUnknownJob]), finishing the arrival in the
// same transaction. On a database error or another worker's live claim
// ([*errInFlight]) it leaves e pending and releases any claim it held.
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
		// Claim completed by a worker from before the inbox existed.
		return s.dropEntry(ctx, e, DropDuplicate, by)
	case idempotency.KindProcessing:
		return Outcome{}, &errInFlight{retryAfter: claimed.RetryAfter}
	case idempotency.KindConflict:
		return s.dropEntry(ctx, e, DropHashMismatch, by)
	}
	return Outcome{}, fmt.Errorf("providerjobs: claim answered %s", claimed.Kind)
}

// apply applies a claimed delivery, completes its claim and finishes its
// arrival in one transaction.
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
		s.cfg.Observer.ObserveApplied(e.Provider, by)
		return Outcome{Accepted: true, Applied: answer.Applied, Status: answer.Status, JobID: jobID}, nil
	case errors.Is(err, errFenceLost):
		// Another worker took over after our lease passed; ours rolled back.
		s.dropped(ctx, e, DropDuplicate)
		return Outcome{Reason: DropDuplicate, JobID: jobID}, nil
	case errors.Is(err, errFinished):
		// Another worker dropped the arrival; release our claim so it is not
		// left processing.
		_ = s.release(ctx, claim)
		s.cfg.Observer.ObserveDrop(e.Provider, string(DropDuplicate))
		return Outcome{Reason: DropDuplicate, JobID: jobID}, nil
	}
	// Safe even if the commit went through: release is fenced and
	// conditional on an unfinished claim.
	if rerr := s.release(ctx, claim); rerr != nil {
		err = errors.Join(err, fmt.Errorf("release claim: %w", rerr))
	}
	return Outcome{}, fmt.Errorf("providerjobs: apply delivery: %w", err)
}

// applyTx is apply's transaction; errFenceLost when the lease was taken
// over, errFinished when another worker finished the arrival.
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
			// Gone since resolution, with its Run.
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

func (s *Service) release(ctx context.Context, claim *idempotency.Claim) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	_, err := s.plane.Release(ctx, claim)
	return err
}

// dropEntry finishes e as dropped and records the drop, or answers the
// outcome of a worker that finished it first.
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

func (s *Service) dropped(ctx context.Context, e *InboxEntry, reason DropReason) {
	if err := s.recordDrop(ctx, e.Provider, e.PathJobID, e.DeliveryID, e.RequestHash, reason, e.OrganizationID, e.JobID); err != nil {
		s.auditFailed(ctx, e.Provider, e.DeliveryID, reason, err)
	}
	s.cfg.Observer.ObserveDrop(e.Provider, string(reason))
}

// recordDrop writes a drop to the audit; org and job are nil for unknown_job.
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

// retryLater schedules e's next attempt after delay; best effort, since the
// applier takes e when its lease passes anyway.
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

// backoff returns the wait after attempts failures: doubling from a second
// up to MaxBackoff.
func (s *Service) backoff(attempts int) time.Duration {
	// Cap the shift: 2^33 s is the largest power of two a Duration holds.
	return min(time.Second<<min(max(attempts-1, 0), 33), s.cfg.MaxBackoff)
}

// FindArrivals returns a delivery id's arrivals in every organization, oldest first.
func (s *Service) FindArrivals(ctx context.Context, provider, deliveryID string) ([]InboxEntry, error) {
	return s.arrivals(ctx, "find arrivals", inboxFind, provider, deliveryID)
}

func (s *Service) arrivals(ctx context.Context, what, query string, args ...any) (_ []InboxEntry, err error) {
	defer dberr.Annotate(&err)
	rows, _ := s.db.Query(ctx, query, args...)
	out, err := pgx.CollectRows(rows, keyset.Value(func(r pgx.Row) (*InboxEntry, error) { return scanEntry(r) }))
	if err != nil {
		return nil, fmt.Errorf("providerjobs: %s: %w", what, err)
	}
	return out, nil
}

// Copies counts the dropped copies of one arrival by reason.
type Copies struct {
	Duplicates, HashMismatches, PathMismatches int64
	// LastAt is nil if no copy arrived.
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
	// Provider and Status filter when set.
	Provider string
	Status   InboxStatus
	// Limit is the most arrivals returned, 1 to 1000. Default 50.
	Limit int
}

// ListArrivals returns arrivals newest first, or an error wrapping
// [ErrInvalid] for a bad limit or status.
func (s *Service) ListArrivals(ctx context.Context, p ListArrivalsParams) ([]InboxEntry, error) {
	if p.Limit == 0 {
		p.Limit = 50
	}
	if p.Limit < 1 || p.Limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d: must be 1 to 1000", ErrInvalid, p.Limit)
	}
	if err := checkInboxStatus(p.Status); err != nil {
		return nil, err
	}
	return s.arrivals(ctx, "list the inbox", inboxList, sqlarg.Null(p.Provider), sqlarg.Null(string(p.Status)), p.Limit)
}

func checkInboxStatus(s InboxStatus) error {
	switch s {
	case "", InboxPending, InboxApplied, InboxDropped:
		return nil
	}
	return fmt.Errorf("%w: status %q: must be pending, applied or dropped", ErrInvalid, s)
}
