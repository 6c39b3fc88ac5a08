package providerjobs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/shardpass"
	"github.com/searchd/searchd/internal/sqlarg"
)

// ErrInvalidCursor reports a list cursor this package did not write.
var ErrInvalidCursor = keyset.InvalidCursor("providerjobs")

// Querier runs queries; a *pgxpool.Pool is one.
type Querier = shardpass.DB

// Audit reads an organization's jobs and deliveries for the console. It is
// safe for concurrent use.
type Audit struct {
	db      Querier
	cursors keyset.Key
}

// NewAudit returns the audit reads on db.
func NewAudit(db Querier) *Audit { return &Audit{db: db} }

// Cursors returns a copy of a that signs its cursors with k; the default
// zero key is accepted by no other process.
func (a *Audit) Cursors(k keyset.Key) *Audit {
	c := *a
	c.cursors = k
	return &c
}

// JobListParams filter [Audit.Jobs]; zero values match all.
type JobListParams struct {
	RunID    uuid.UUID
	Provider string
	Status   Status
	// Limit is 1 to 200; zero or less is 50. Cursor is the previous page's
	// next cursor, "" for the first.
	Limit  int
	Cursor string
}

// Jobs returns a page of org's jobs, newest first, without results, and the
// next cursor ("" after the last), or [ErrInvalidCursor].
func (a *Audit) Jobs(ctx context.Context, org uuid.UUID, p JobListParams) (_ []Job, _ string, err error) {
	defer dberr.Annotate(&err)
	return readPage(ctx, a, keyset.List{Name: "providerjobs.jobs", Org: org}, "list", jobAuditList, p.Cursor, p.Limit, []any{org},
		[]any{sqlarg.Null(p.RunID), sqlarg.Null(p.Provider), sqlarg.Null(string(p.Status))},
		pgx.RowToStructByPos[Job],
		func(j Job) keyset.Position { return keyset.Position{CreatedAt: j.CreatedAt, ID: j.ID} })
}

// readPage reads a keyset page of query (arguments lead, the cursor
// position, limit+1, tail) and the next cursor, or [ErrInvalidCursor].
func readPage[T any](ctx context.Context, a *Audit, l keyset.List, what, query, cursor string, limit int, lead, tail []any,
	scan pgx.RowToFunc[T], pos func(T) keyset.Position) ([]T, string, error) {
	q, err := a.cursors.Read(l, cursor, limit, 50, 200)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	return keyset.Query(ctx, a.db, "providerjobs: "+what, q, scan, pos, query, slices.Concat(lead, []any{q.At, q.ID, q.Limit + 1}, tail)...)
}

// AppliedDelivery is a completed delivery claim of a job.
type AppliedDelivery struct {
	DeliveryID  string
	RequestHash string
	ClaimedAt   time.Time
	// Applied reports whether the delivery changed the job.
	Applied bool
	// Status is the job's status afterwards.
	Status Status
}

// AuditResultBytes is the largest result, as JSON text, [Audit.Job] returns.
const AuditResultBytes = 128 << 10

// Job is [Service.Get] with the result only up to [AuditResultBytes], and the
// stored result's size (0 if none).
func (a *Audit) Job(ctx context.Context, org, id uuid.UUID) (_ *Job, resultBytes int64, err error) {
	defer dberr.Annotate(&err)
	rows, _ := a.db.Query(ctx, jobAuditGet, org, id, AuditResultBytes)
	j, err := pgx.CollectOneRow(rows, pgx.RowToStructByPos[struct {
		Job
		ResultBytes int64
	}])
	if err != nil {
		return nil, 0, sqlarg.RowError(err, ErrNotFound, "providerjobs: audit job")
	}
	return &j.Job, j.ResultBytes, nil
}

// Deliveries returns j's remembered applied deliveries, newest first, at most
// limit (1 to 200; zero or less is 50).
func (a *Audit) Deliveries(ctx context.Context, j *Job, limit int) (_ []AppliedDelivery, err error) {
	defer dberr.Annotate(&err)
	rows, _ := a.db.Query(ctx, deliveryAuditList, j.OrganizationID, Scope(j.Provider), j.ID.String(), keyset.Limit(limit, 50, 200))
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AppliedDelivery, error) {
		var (
			d   AppliedDelivery
			raw []byte
		)
		if err := r.Scan(&d.DeliveryID, &d.RequestHash, &d.ClaimedAt, &raw); err != nil {
			return d, err
		}
		var ans claimAnswer
		if err := json.Unmarshal(raw, &ans); err == nil {
			d.Applied, d.Status = ans.Applied, ans.Status
		}
		return d, nil
	})
	if err != nil {
		return nil, fmt.Errorf("providerjobs: deliveries: %w", err)
	}
	return list, nil
}

// Drops returns a page of job jobID's drops, newest first, and the next
// cursor, or [ErrInvalidCursor].
func (a *Audit) Drops(ctx context.Context, org, jobID uuid.UUID, limit int, cursor string) (_ []Drop, _ string, err error) {
	defer dberr.Annotate(&err)
	return readPage(ctx, a, keyset.List{Name: "providerjobs.drops", Org: org, Parent: jobID}, "drops", dropAuditList, cursor, limit, []any{org, jobID}, nil,
		pgx.RowToStructByPos[Drop], func(d Drop) keyset.Position { return keyset.Position{CreatedAt: d.ReceivedAt, ID: d.ID} })
}

// jobAuditGet reads a job, its result only if at most $3 bytes. $1 org, $2 id.
const jobAuditGet = `
SELECT j.id, j.organization_id, j.run_id, j.provider, j.provider_job_id, j.status,
	CASE WHEN octet_length(j.result::text) <= $3 THEN j.result END,
	j.version, j.created_at, j.updated_at, coalesce(octet_length(j.result::text), 0)
FROM agent.provider_jobs j
WHERE j.organization_id = $1 AND j.id = $2`

// jobAuditList: $1 org, $2 created_at, $3 id (the cursor), $4 limit, $5 run,
// $6 provider, $7 status (NULL for any). Results read as NULL.
const jobAuditList = `
SELECT j.id, j.organization_id, j.run_id, j.provider, j.provider_job_id,
	j.status, NULL::jsonb, j.version, j.created_at, j.updated_at
FROM agent.provider_jobs j
WHERE j.organization_id = $1
	AND ($5::uuid IS NULL OR j.run_id = $5::uuid)
	AND ($6::text IS NULL OR j.provider = $6::text)
	AND ($7::text IS NULL OR j.status = $7::text)
	AND (j.created_at, j.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY j.created_at DESC, j.id DESC
LIMIT $4`

// deliveryAuditList: $1 org, $2 scope, $3 job id, $4 limit.
const deliveryAuditList = `
SELECT k.key, k.request_hash, k.claimed_at, k.response
FROM agent.idempotency_keys k
WHERE k.organization_id = $1 AND k.scope = $2
	AND k.status = 'completed' AND k.resource_type = '` + ResourceType + `' AND k.resource_id = $3
	AND k.retain_until > now()
ORDER BY k.claimed_at DESC
LIMIT $4`

// dropAuditList: $1 org, $2 job id, $3 received_at, $4 id (the cursor), $5 limit.
const dropAuditList = `
SELECT d.id, d.delivery_id, d.reason, d.request_hash, d.received_at
FROM agent.webhook_drops d
WHERE d.organization_id = $1 AND d.job_id = $2
	AND (d.received_at, d.id) < (coalesce($3::timestamptz, 'infinity'),
		coalesce($4::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY d.received_at DESC, d.id DESC
LIMIT $5`
