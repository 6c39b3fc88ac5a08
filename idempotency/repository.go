package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/internal/sqlarg"
)

// DBTX is what the plane needs of a database handle: a *pgxpool.Pool, a
// *pgx.Conn or a pgx.Tx. Passing a transaction makes a completion commit or
// roll back with the caller's own writes.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Status is the state of a stored claim.
type Status string

const (
	// StatusProcessing is a claim a worker holds and has not ended.
	StatusProcessing Status = "processing"
	// StatusCompleted is a claim that stores its answer.
	StatusCompleted Status = "completed"
)

// Record is one row of agent.idempotency_keys, as the repository read it.
type Record struct {
	ID             uuid.UUID
	OrganizationID uuid.UUID
	Scope          string
	Key            string
	RequestHash    string
	Status         Status
	LeaseToken     uuid.UUID
	ResourceType   string // empty when the claim names no resource
	ResourceID     string // empty when the claim names no resource
	Response       json.RawMessage
	ClaimedAt      time.Time
	LeaseExpiresAt time.Time
	RetainUntil    time.Time
	// Waited reports that a caller waiting for the processing claim to end
	// ([Service.ClaimWait]) marked it: its end is announced on
	// [NotifyChannel].
	Waited bool
	// ObservedAt is the database clock at the statement that read the row;
	// zero on the record [Repository.Complete] returns, which judged no
	// clock.
	// Lease and retention are judged against it, never the process clock.
	ObservedAt time.Time
}

// LeaseLive reports whether the lease had not passed when the row was read.
func (r *Record) LeaseLive() bool { return r.LeaseExpiresAt.After(r.ObservedAt) }

// Retained reports whether the retention had not passed when the row was
// read. A row past its retention answers nothing, whether or not the sweeper
// has deleted it yet.
func (r *Record) Retained() bool { return r.RetainUntil.After(r.ObservedAt) }

// ClaimParams are the inputs of [Repository.TryClaim],
// [Repository.Reclaim] and [Repository.ReplaceExpired].
type ClaimParams struct {
	// ID is the id of a new row (TryClaim, ReplaceExpired). The caller mints
	// it; Reclaim keeps the row's id.
	ID             uuid.UUID
	OrganizationID uuid.UUID
	Scope          string
	Key            string
	RequestHash    string
	// LeaseToken is the fence the claimer will carry to Complete or
	// Release. The caller mints a new one for every claim and reclaim.
	LeaseToken uuid.UUID
	// Lease sets lease_expires_at to the database clock plus Lease.
	Lease time.Duration
	// Retention sets retain_until to the database clock plus the longer of
	// Retention and Lease, so the row's retain_until >= lease_expires_at
	// check holds whatever lease a caller asks for. A reclaim never
	// shortens an existing retain_until.
	Retention time.Duration
}

// Repository runs the plane's atomic SQL. Each method is one statement;
// none retries and none decides what a conflict means, which is the
// [Service]'s job. Methods return driver errors wrapped with the operation.
type Repository struct {
	db    DBTX
	clock *dbclock.Clock
}

// NewRepository returns a repository on db whose statements run at clock:
// nil (production) is the database's now(), a stub is for tests.
func NewRepository(db DBTX, clock *dbclock.Clock) *Repository {
	return &Repository{db: db, clock: clock}
}

// WithTx returns a repository that runs its statements on tx, with the same
// clock.
func (r *Repository) WithTx(tx DBTX) *Repository {
	return &Repository{db: tx, clock: r.clock}
}

// nowArg is the $now argument: NULL in production, the stub in tests.
func (r *Repository) nowArg() any { return r.clock.Arg() }

// claimArgs are the parameters of claimInsert and claimReplaceExpired
// (withID) or of claimReclaim, which keeps the row's id.
func (r *Repository) claimArgs(p ClaimParams, withID bool) pgx.StrictNamedArgs {
	args := pgx.StrictNamedArgs{
		"org": p.OrganizationID, "scope": p.Scope, "key": p.Key, "request_hash": p.RequestHash,
		"lease_token": p.LeaseToken, "lease_us": p.Lease.Microseconds(),
		"retention_us": p.Retention.Microseconds(), "now": r.nowArg(),
	}
	if withID {
		args["id"] = p.ID
	}
	return args
}

// TryClaim inserts a new processing claim and returns it. It returns nil and
// no error when the key is already stored, whatever its state: the caller
// reads the row with Get and decides.
func (r *Repository) TryClaim(ctx context.Context, p ClaimParams) (*Record, error) {
	rec, err := scanRecord(r.db.QueryRow(ctx, claimInsert, r.claimArgs(p, true)))
	return orNil(rec, err, "try claim")
}

// Reclaim moves the lease of a processing claim whose lease has passed, whose
// request hash equals p.RequestHash and whose retention still holds, to
// p.LeaseToken, and returns the row. It returns nil and no error when the row
// is not reclaimable: absent, completed, a live lease (another worker took it
// first), a different hash or a passed retention. The claim keeps its id and
// its retain_until never shrinks.
func (r *Repository) Reclaim(ctx context.Context, p ClaimParams) (*Record, error) {
	rec, err := scanRecord(r.db.QueryRow(ctx, claimReclaim, r.claimArgs(p, false)))
	return orNil(rec, err, "reclaim")
}

// ReplaceExpired turns a row whose retention has passed into a new
// processing claim with id p.ID, as if the key had been absent, and returns
// it. It returns nil and no error when the row is absent or still retained.
func (r *Repository) ReplaceExpired(ctx context.Context, p ClaimParams) (*Record, error) {
	rec, err := scanRecord(r.db.QueryRow(ctx, claimReplaceExpired, r.claimArgs(p, true)))
	return orNil(rec, err, "replace expired claim")
}

// Get returns the stored claim for the key, or nil and no error when none is
// stored. It reports rows past their retention as they are; judging them is
// the service's job.
func (r *Repository) Get(ctx context.Context, organizationID uuid.UUID, scope, key string) (*Record, error) {
	rec, err := scanRecord(r.db.QueryRow(ctx, claimGet, organizationID, scope, key, r.nowArg()))
	return orNil(rec, err, "get claim")
}

// Complete stores the answer of the processing claim claimID of
// organizationID held with leaseToken and returns the completed row. It
// returns nil and no error when the fence moved on: another worker
// reclaimed the key, the claim was released, or it is already completed.
// The caller must then do nothing. An empty resourceType and resourceID
// store NULL; a nil response stores NULL. When a waiter marked the claim,
// its end is announced on the same handle ([NotifyChannel]): inside the
// caller's transaction, at its commit; else right after. The announcement
// is best effort: when it fails the completion stands (in a transaction,
// the failure aborts it, and its commit reports that), and the waiter
// reads the claim again when the holder's lease passes.
func (r *Repository) Complete(ctx context.Context, organizationID, claimID, leaseToken uuid.UUID, resourceType, resourceID string, response json.RawMessage) (*Record, error) {
	rec, err := scanColumns(r.db.QueryRow(ctx, claimComplete, pgx.StrictNamedArgs{
		"org": organizationID, "id": claimID, "lease_token": leaseToken,
		"resource_type": sqlarg.Null(resourceType), "resource_id": sqlarg.Null(resourceID),
		"response": sqlarg.JSON(response),
	}), false)
	rec, err = orNil(rec, err, "complete claim")
	if err == nil && rec != nil && rec.Waited {
		_ = r.announceEnd(ctx, r.db, rec.OrganizationID, rec.Scope, rec.Key)
	}
	return rec, err
}

// Release deletes the unfinished claim claimID of organizationID still held
// with leaseToken. It reports false and no error when the fence moved on;
// the caller must then do nothing, because another worker owns the key.
// When a waiter marked the claim, its end is announced as by Complete.
func (r *Repository) Release(ctx context.Context, organizationID, claimID, leaseToken uuid.UUID) (bool, error) {
	var scope, key string
	var waited bool
	err := r.db.QueryRow(ctx, claimRelease, organizationID, claimID, leaseToken).Scan(&scope, &key, &waited)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("idempotency: release claim: %w", err)
	}
	if waited {
		_ = r.announceEnd(ctx, r.db, organizationID, scope, key)
	}
	return true, nil
}

// announceEnd tells the waiters of the key that its claim ended, on db.
// The waiters listen on the server the replicas connect to, the
// coordinator of a cluster, which a statement on no table runs on: the
// notification reaches them whichever worker holds the claim.
func (r *Repository) announceEnd(ctx context.Context, db DBTX, organizationID uuid.UUID, scope, key string) error {
	if _, err := db.Exec(ctx, claimEnded, NotifyChannel, notifyPayload(organizationID, scope, key)); err != nil {
		return fmt.Errorf("idempotency: announce the end of a waited claim: %w", err)
	}
	return nil
}

// MarkWaited marks the processing claim of the key as waited for, so its
// completion notifies the waiters (see [Service.ClaimWait]). It reports
// false and no error when the key holds no processing claim: it completed
// or was released meanwhile, and the caller reads it again instead of
// waiting.
func (r *Repository) MarkWaited(ctx context.Context, organizationID uuid.UUID, scope, key string) (bool, error) {
	tag, err := r.db.Exec(ctx, claimMarkWaited, organizationID, scope, key)
	if err != nil {
		return false, fmt.Errorf("idempotency: mark claim waited: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// scanRecord scans recordColumns and the statement's clock.
func scanRecord(row pgx.Row) (*Record, error) { return scanColumns(row, true) }

// scanColumns scans recordColumns, then the statement's clock into
// ObservedAt when withClock is set.
func scanColumns(row pgx.Row, withClock bool) (*Record, error) {
	var (
		rec                      Record
		status                   string
		resourceType, resourceID *string
	)
	dest := []any{&rec.ID, &rec.OrganizationID, &rec.Scope, &rec.Key, &rec.RequestHash, &status,
		&rec.LeaseToken, &resourceType, &resourceID, &rec.Response,
		&rec.ClaimedAt, &rec.LeaseExpiresAt, &rec.RetainUntil, &rec.Waited}
	if withClock {
		dest = append(dest, &rec.ObservedAt)
	}
	err := row.Scan(dest...)
	if err != nil {
		return nil, err
	}
	rec.Status = Status(status)
	if resourceType != nil {
		rec.ResourceType = *resourceType
	}
	if resourceID != nil {
		rec.ResourceID = *resourceID
	}
	return &rec, nil
}

func orNil(rec *Record, err error, op string) (*Record, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency: %s: %w", op, err)
	}
	return rec, nil
}
