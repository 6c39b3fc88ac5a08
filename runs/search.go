package runs

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// SearchParams filter [Store.Search]; zero values match every Run.
type SearchParams struct {
	SavedSearchID uuid.UUID
	SnapshotID    uuid.UUID
	// Actor is the starting token's sub.
	Actor string
	// Key matches either start-key namespace.
	Key    string
	Status string
	// From and To bound created_at: at or after From, before To.
	From, To time.Time
	// Limit and Cursor are as in [ListParams].
	Limit  int
	Cursor string
}

// Search returns a page of org's Runs matching p, newest first, without
// inputs, and the next cursor ("" after the last), or [ErrInvalidCursor].
func (s *Store) Search(ctx context.Context, org uuid.UUID, p SearchParams) (_ []Run, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "runs.search", Org: org}, p.Cursor, p.Limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	var keys any
	if p.Key != "" {
		keys = []string{SavedSearchStartKey(p.Key), DirectStartKey(p.Key)}
	}
	return keyset.Query(ctx, s.db, "runs: search", q, keyset.Value(scanRun), Run.position,
		runSearch, org, q.At, q.ID, q.Limit+1, sqlarg.Null(p.SavedSearchID), sqlarg.Null(p.SnapshotID),
		sqlarg.Null(p.Actor), keys, sqlarg.Null(p.Status), sqlarg.Null(p.From), sqlarg.Null(p.To))
}

// AuditInputBytes is the largest input [Store.GetAudit] returns: twice a
// start's 64 KiB, since jsonb text adds spaces.
const AuditInputBytes = 128 << 10

// GetAudit is [Store.Get] with the input only up to AuditInputBytes, and the
// stored input's size (0 if none).
func (s *Store) GetAudit(ctx context.Context, org, id uuid.UUID) (_ *Run, inputBytes int64, err error) {
	defer dberr.Annotate(&err)
	var (
		run   runScan
		bytes pgtype.Int8 // NULL (no input) is 0
	)
	if err := s.db.QueryRow(ctx, runAuditGet, org, id, AuditInputBytes).Scan(append(run.scanDest(), &bytes)...); err != nil {
		return nil, 0, translate("get", err)
	}
	return run.run(), bytes.Int64, nil
}

const runAuditColumns = runColumnsHead + `NULL::jsonb` + runColumnsTail

// runAuditGet reads a Run, its input only if at most $3 bytes. $1 org, $2 id.
const runAuditGet = `
SELECT ` + runColumnsHead + `CASE WHEN r.input_bytes <= $3 THEN r.input END` + runColumnsTail + `, r.input_bytes
FROM agent.runs r
WHERE r.organization_id = $1 AND r.id = $2`

// runSearch is runList with optional filters (NULL for none): $5
// saved_search_id, $6 snapshot_id, $7 created_by, $8 start keys, $9 status,
// $10 from, $11 to.
const runSearch = `
SELECT ` + runAuditColumns + `
FROM agent.runs r
WHERE r.organization_id = $1
	AND ($5::uuid IS NULL OR r.saved_search_id = $5::uuid)
	AND ($6::uuid IS NULL OR r.snapshot_id = $6::uuid)
	AND ($7::text IS NULL OR r.created_by = $7::text)
	AND ($8::text[] IS NULL OR r.start_key = ANY ($8::text[]))
	AND ($9::text IS NULL OR r.status = $9::text)
	AND ($10::timestamptz IS NULL OR r.created_at >= $10::timestamptz)
	AND ($11::timestamptz IS NULL OR r.created_at < $11::timestamptz)
	AND (r.created_at, r.id) < (coalesce($2::timestamptz, 'infinity'),
		coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY r.created_at DESC, r.id DESC
LIMIT $4`
