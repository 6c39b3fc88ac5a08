package snapshot

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// TimelineEntry is one snapshot of a saved search's timeline, without its
// brief and baseline.
type TimelineEntry struct {
	ID                 uuid.UUID
	SavedSearchID      uuid.UUID
	SavedSearchVersion int64
	SavedSearchName    string
	ContentHash        string
	BaselineItems      int
	// CreatedBy is nil when unknown.
	CreatedBy *string
	Origin    string
	CreatedAt time.Time
	// Runs is how many Runs were admitted on it.
	Runs int64
}

// TimelineParams filter [Store.Timeline]; zero values match all.
type TimelineParams struct {
	// Actor keeps the snapshots this actor's starts froze.
	Actor string
	// From and To bound created_at: at or after From, before To.
	From, To time.Time
	// Limit is the page size, 1 to 200; zero or less is 50.
	Limit int
	// Cursor is the previous page's next cursor; "" for the first.
	Cursor string
}

// Timeline returns a page of the snapshots of org's saved search (archived
// too), newest first, with their Run counts, and the next cursor ("" after
// the last), or [ErrNotFound] or [ErrInvalidCursor].
func (s *Store) Timeline(ctx context.Context, org, savedSearchID uuid.UUID, p TimelineParams) (_ []TimelineEntry, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "snapshot.timeline", Org: org, Parent: savedSearchID}, p.Cursor, p.Limit, 50, 200)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	if err := s.known(ctx, "timeline", org, savedSearchID, ErrNotFound); err != nil {
		return nil, "", err
	}
	return keyset.Query(ctx, s.db, "snapshot: timeline", q, pgx.RowToStructByPos[TimelineEntry],
		func(e TimelineEntry) keyset.Position { return keyset.Position{CreatedAt: e.CreatedAt, ID: e.ID} },
		snapshotTimeline, org, savedSearchID, q.At, q.ID, q.Limit+1, sqlarg.Null(p.Actor), sqlarg.Null(p.From), sqlarg.Null(p.To))
}

// snapshotTimeline reads snapshots newest first with their Run counts; the
// count names the organization so Citus routes it to one shard group.
// $1 org, $2 saved_search_id, $3 created_at, $4 id, $5 limit, $6 actor, $7 from, $8 to.
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
