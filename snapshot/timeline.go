package snapshot

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// TimelineEntry is one snapshot of a saved search's timeline: what names
// it, without the brief and baseline it froze.
type TimelineEntry struct {
	ID                 uuid.UUID
	SavedSearchID      uuid.UUID
	SavedSearchVersion int64
	SavedSearchName    string
	ContentHash        string
	// BaselineItems is how many baseline items it froze.
	BaselineItems int
	// CreatedBy is the actor of the start that froze it; nil when unknown.
	CreatedBy *string
	// Origin is OriginAPI or OriginSchedule.
	Origin    string
	CreatedAt time.Time
	// Runs is how many Runs were admitted on it.
	Runs int64
}

// TimelineParams are the inputs of [Store.Timeline]; zero filters match
// every snapshot.
type TimelineParams struct {
	// Actor keeps the snapshots a start by this actor froze.
	Actor string
	// From and To keep the snapshots created at or after From and before
	// To.
	From, To time.Time
	// Limit is the page size, 1 to 200; zero or less is 50.
	Limit int
	// Cursor is the next cursor of the previous page; "" for the first.
	Cursor string
}

// Timeline returns a page of the snapshots of org's saved search
// savedSearchID, archived or not, newest first, each with the number of
// Runs admitted on it, and the cursor of the next page ("" after the
// last). It returns [ErrNotFound] when org has no such saved search and
// [ErrInvalidCursor] for a cursor it did not write.
func (s *Store) Timeline(ctx context.Context, org, savedSearchID uuid.UUID, p TimelineParams) (_ []TimelineEntry, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "snapshot.timeline", Org: org, Parent: savedSearchID}, p.Cursor, p.Limit, 50, 200)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	var known bool
	if err := s.db.QueryRow(ctx, savedSearchKnown, org, savedSearchID).Scan(&known); err != nil {
		return nil, "", fmt.Errorf("snapshot: timeline: %w", err)
	}
	if !known {
		return nil, "", ErrNotFound
	}
	return keyset.Query(ctx, s.db, "snapshot: timeline", q, pgx.RowToStructByPos[TimelineEntry],
		func(e TimelineEntry) keyset.Position { return keyset.Position{CreatedAt: e.CreatedAt, ID: e.ID} },
		snapshotTimeline, org, savedSearchID, q.At, q.ID, q.Limit+1, sqlarg.Null(p.Actor), sqlarg.Null(p.From), sqlarg.Null(p.To))
}

// snapshotTimeline reads a page of a saved search's snapshots, newest
// first, after ($3 created_at, $4 id), with the Runs admitted on each
// (counted by runs_snapshot_idx). The count names the organization ($1)
// itself, not only through the snapshot: a cluster then routes the whole
// statement to the organization's shard group. $1 org, $2
// saved_search_id, $5 limit, $6 actor, $7 from, $8 to: NULL for none.
const snapshotTimeline = `
SELECT sn.id, sn.saved_search_id, sn.saved_search_version, sn.saved_search_name, sn.content_hash,
	coalesce(jsonb_array_length(sn.baseline -> 'items'), 0), sn.created_by, sn.origin, sn.created_at,
	(SELECT count(*) FROM agent.runs r
		WHERE r.organization_id = $1 AND r.organization_id = sn.organization_id AND r.snapshot_id = sn.id)
FROM agent.saved_search_snapshots sn
WHERE sn.organization_id = $1 AND sn.saved_search_id = $2
	AND ($6::text IS NULL OR sn.created_by = $6::text)
	AND ($7::timestamptz IS NULL OR sn.created_at >= $7::timestamptz)
	AND ($8::timestamptz IS NULL OR sn.created_at < $8::timestamptz)
	AND (sn.created_at, sn.id) < (coalesce($3::timestamptz, 'infinity'),
		coalesce($4::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY sn.created_at DESC, sn.id DESC
LIMIT $5`
