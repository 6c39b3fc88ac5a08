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

// DBTX is a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Status is a stored claim's state.
type Status string

const (
	// StatusProcessing is a claim a worker holds and has not ended.
	StatusProcessing Status = "processing"
	// StatusCompleted is a claim that stores its answer.
	StatusCompleted Status = "completed"
)

// Record is one row of agent.idempotency_keys.
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
	// Waited reports that a [Service.ClaimWait] caller marked the claim, so
	// its end is announced on [NotifyChannel].
	Waited bool
	// ObservedAt is the database clock when the row was read (zero from
	// [Repository.Complete]); lease and retention are judged against it.
	ObservedAt time.Time
}

// LeaseLive reports whether the lease had not passed when the row was read.
func (r *Record) LeaseLive() bool { return r.LeaseExpiresAt.After(r.ObservedAt) }

// Retained reports whether the retention had not passed when the row was
// read, whether or not the sweeper has deleted it.
func (r *Record) Retained() bool { return r.RetainUntil.After(r.ObservedAt) }

// ClaimParams are the inputs of the claiming statements.
type ClaimParams struct {
	// ID is the new row's id; Reclaim keeps the existing id.
	ID             uuid.UUID
	OrganizationID uuid.UUID
	Scope          string
	Key            string
	RequestHash    string
	// LeaseToken is a fresh fence for every claim and reclaim.
	LeaseToken uuid.UUID
	Lease      time.Duration
	// Retention is at least Lease; a reclaim never shortens retain_until.
	Retention time.Duration
}

// Repository runs the claim SQL, one statement per method, without retries
// or conflict handling.
type Repository struct {
	db    DBTX
	clock *dbclock.Clock
}

// NewRepository returns a repository on db at clock (nil: the database's now()).
func NewRepository(db DBTX, clock *dbclock.Clock) *Repository {
	return &Repository{db: db, clock: clock}
}

// WithTx returns a repository on tx with the same clock.
func (r *Repository) WithTx(tx DBTX) *Repository {
	return &Repository{db: tx, clock: r.clock}
}

func (r *Repository) claimArgs(p ClaimParams, withID bool) pgx.StrictNamedArgs {
	args := pgx.StrictNamedArgs{
		"org": p.OrganizationID, "scope": p.Scope, "key": p.Key, "request_hash": p.RequestHash,
		"lease_token": p.LeaseToken, "lease_us": p.Lease.Microseconds(),
		"retention_us": p.Retention.Microseconds(), "now": r.clock.Arg(),
	}
	if withID {
		args["id"] = p.ID
	}
	return args
}

// TryClaim inserts a processing claim, or returns nil, nil when the key exists.
func (r *Repository) TryClaim(ctx context.Context, p ClaimParams) (*Record, error) {
	rec, err := scanRecord(r.db.QueryRow(ctx, claimInsert, r.claimArgs(p, true)))
	return orNil(rec, err, "try claim")
}

// Reclaim takes over a retained processing claim with the same hash whose
// lease has passed, keeping its id; nil, nil when it is not reclaimable.
func (r *Repository) Reclaim(ctx context.Context, p ClaimParams) (*Record, error) {
	rec, err := scanRecord(r.db.QueryRow(ctx, claimReclaim, r.claimArgs(p, false)))
	return orNil(rec, err, "reclaim")
}

// ReplaceExpired replaces a row past its retention with a new claim; nil,
// nil when the row is absent or still retained.
func (r *Repository) ReplaceExpired(ctx context.Context, p ClaimParams) (*Record, error) {
	rec, err := scanRecord(r.db.QueryRow(ctx, claimReplaceExpired, r.claimArgs(p, true)))
	return orNil(rec, err, "replace expired claim")
}

// Get returns the stored claim, even past retention, or nil, nil.
func (r *Repository) Get(ctx context.Context, organizationID uuid.UUID, scope, key string) (*Record, error) {
	rec, err := scanRecord(r.db.QueryRow(ctx, claimGet, organizationID, scope, key, r.clock.Arg()))
	return orNil(rec, err, "get claim")
}

// Complete stores the answer of a processing claim held with leaseToken; nil,
// nil when the lease was taken over or the claim ended, and the caller must
// then do nothing. Empty strings and a nil response store NULL. A marked
// claim's end is announced on the same handle, best effort.
func (r *Repository) Complete(ctx context.Context, organizationID, claimID, leaseToken uuid.UUID, resourceType, resourceID string, response json.RawMessage) (*Record, error) {
	rec, err := ScanRecord(r.db.QueryRow(ctx, claimComplete, pgx.StrictNamedArgs{
		"org": organizationID, "id": claimID, "lease_token": leaseToken,
		"resource_type": sqlarg.Null(resourceType), "resource_id": sqlarg.Null(resourceID),
		"response": sqlarg.JSON(response),
	}), true, false)
	rec, err = orNil(rec, err, "complete claim")
	if err == nil && rec != nil && rec.Waited {
		_ = r.announceEnd(ctx, r.db, rec.OrganizationID, rec.Scope, rec.Key)
	}
	return rec, err
}

// Release deletes an unfinished claim held with leaseToken; false when the
// lease was taken over, and the caller must then do nothing.
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

// announceEnd notifies the key's waiters; NOTIFY touches no table, so on
// Citus it runs on the coordinator, where they listen.
func (r *Repository) announceEnd(ctx context.Context, db DBTX, organizationID uuid.UUID, scope, key string) error {
	if _, err := db.Exec(ctx, claimEnded, NotifyChannel, notifyPayload(organizationID, scope, key)); err != nil {
		return fmt.Errorf("idempotency: announce the end of a waited claim: %w", err)
	}
	return nil
}

// MarkWaited marks the key's processing claim as waited for; false when there
// is none: reread instead of waiting.
func (r *Repository) MarkWaited(ctx context.Context, organizationID uuid.UUID, scope, key string) (bool, error) {
	tag, err := r.db.Exec(ctx, claimMarkWaited, organizationID, scope, key)
	if err != nil {
		return false, fmt.Errorf("idempotency: mark claim waited: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func scanRecord(row pgx.Row) (*Record, error) { return ScanRecord(row, true, true) }

// ScanRecord scans a claim read as agent.idempotency_keys' columns id to
// retain_until in table order, then waited when waited is set, then the
// read's database clock (ObservedAt) when clock is set.
func ScanRecord(row pgx.Row, waited, clock bool) (*Record, error) {
	var (
		rec                      Record
		resourceType, resourceID *string
	)
	dest := []any{&rec.ID, &rec.OrganizationID, &rec.Scope, &rec.Key, &rec.RequestHash, &rec.Status,
		&rec.LeaseToken, &resourceType, &resourceID, &rec.Response,
		&rec.ClaimedAt, &rec.LeaseExpiresAt, &rec.RetainUntil}
	if waited {
		dest = append(dest, &rec.Waited)
	}
	if clock {
		dest = append(dest, &rec.ObservedAt)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
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
