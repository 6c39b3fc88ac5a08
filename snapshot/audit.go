package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/sqlarg"
	"github.com/searchd/searchd/savedsearch"
)

// The audit reads of snapshots: the console's. A snapshot may hold a
// megabyte of baseline (more, stored before the limits existed), so
// these never read it whole: a snapshot is read without its baseline
// items ([Store.Header]), its items a page at a time
// ([Store.BaselineItems]), and two snapshots' baselines are compared in
// the database, which answers the counts and a page of each side
// ([Store.DiffBaselines]). Each answer is bounded in size whatever the
// rows hold.

// Header is a snapshot without its baseline items.
type Header struct {
	ID                 uuid.UUID
	OrganizationID     uuid.UUID
	SavedSearchID      uuid.UUID
	SavedSearchVersion int64
	SavedSearchName    string
	// Brief is the whole brief when BriefBytes is at most
	// savedsearch.AuditBriefBytes, else its query alone: see BriefCut.
	Brief savedsearch.Brief
	// BriefBytes is the stored brief's size as JSON text.
	BriefBytes int64
	// BaselineItems counts the baseline's items; BaselineCursor is its
	// cursor, cut to savedsearch.MaxCursorBytes.
	BaselineItems  int64
	BaselineCursor *string
	ContentHash    string
	// CreatedBy is the actor that started the freeze; nil when unknown.
	CreatedBy *string
	// Origin says who started the freeze: [OriginAPI] or [OriginSchedule].
	Origin    string
	CreatedAt time.Time
}

// BriefCut reports whether Brief holds the query alone, the stored brief
// being over savedsearch.AuditBriefBytes.
func (h *Header) BriefCut() bool { return h.BriefBytes > savedsearch.AuditBriefBytes }

// Header returns snapshot id of org without its baseline items. It
// returns [ErrNotFound] when org has no such snapshot, including another
// organization's.
func (s *Store) Header(ctx context.Context, org, id uuid.UUID) (_ *Header, err error) {
	defer dberr.Annotate(&err)
	var (
		h   Header
		raw []byte
	)
	err = s.db.QueryRow(ctx, snapshotAuditHeader, org, id, savedsearch.AuditBriefBytes).Scan(&h.ID, &h.OrganizationID,
		&h.SavedSearchID, &h.SavedSearchVersion, &h.SavedSearchName, &raw, &h.BriefBytes, &h.BaselineItems,
		&h.BaselineCursor, &h.ContentHash, &h.CreatedBy, &h.Origin, &h.CreatedAt)
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "snapshot: header")
	}
	if err := json.Unmarshal(raw, &h.Brief); err != nil {
		return nil, fmt.Errorf("snapshot: header: decode brief: %w", err)
	}
	return &h, nil
}

// BaselineItems returns a page of the baseline items of org's snapshot id:
// at most limit (1 to MaxListLimit) items after the first after, in their
// order, each cut to savedsearch.MaxItemLen characters (a longer one,
// stored before the limit, ends in "…"), and the position to continue
// after, 0 on the last page. A snapshot org does not have has no items.
func (s *Store) BaselineItems(ctx context.Context, org, id uuid.UUID, after int64, limit int) (_ []string, next int64, err error) {
	defer dberr.Annotate(&err)
	after, limit = max(after, 0), max(1, min(limit, MaxListLimit))
	rows, _ := s.db.Query(ctx, snapshotAuditItems, org, id, after, limit+1) // its error is the rows' (pgx)
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot: baseline items: %w", err)
	}
	if len(list) > limit {
		return list[:limit], after + int64(limit), nil
	}
	return list, 0, nil
}

// DiffParams are the inputs of [Store.DiffBaselines].
type DiffParams struct {
	// AddedAfter and RemovedAfter are the positions (in the newer and the
	// older baseline) after which each side's page starts: 0 for the
	// first page, else the Next a previous diff returned.
	AddedAfter, RemovedAfter int64
	// Limit is each side's page size, 1 to MaxListLimit.
	Limit int
}

// BaselineDiff is what changed from one snapshot's baseline items to
// another's: how many were added, removed and kept, and a page of the
// added and of the removed ones.
type BaselineDiff struct {
	// Added are items of the newer baseline that the older lacks, in the
	// newer's order; Removed are the older's items that the newer lacks,
	// in the older's order. Each is cut as [Store.BaselineItems] cuts.
	Added, Removed []string
	// AddedNext and RemovedNext are the positions to continue after; 0
	// on a side's last page.
	AddedNext, RemovedNext int64
	// AddedCount, RemovedCount and KeptCount count every added, removed
	// and kept item (an item of the newer that the older has too).
	AddedCount, RemovedCount, KeptCount int64
}

// DiffBaselines compares the baseline items of org's snapshots older and
// newer in the database and returns the counts and a page of each side.
// A snapshot org does not have has no items: read both with
// [Store.Header] first.
func (s *Store) DiffBaselines(ctx context.Context, org, older, newer uuid.UUID, p DiffParams) (_ *BaselineDiff, err error) {
	defer dberr.Annotate(&err)
	limit := max(1, min(p.Limit, MaxListLimit))
	p.AddedAfter, p.RemovedAfter = max(p.AddedAfter, 0), max(p.RemovedAfter, 0)
	var d BaselineDiff
	if err := s.db.QueryRow(ctx, snapshotAuditDiffCounts, org, older, newer).Scan(&d.AddedCount, &d.KeptCount, &d.RemovedCount); err != nil {
		return nil, fmt.Errorf("snapshot: diff baselines: %w", err)
	}
	rows, err := s.db.Query(ctx, snapshotAuditDiffPage, org, older, newer, p.AddedAfter, p.RemovedAfter, limit+1)
	if err != nil {
		return nil, fmt.Errorf("snapshot: diff baselines: %w", err)
	}
	var (
		added                  bool
		pos                    int64
		item                   string
		lastAdded, lastRemoved int64
	)
	_, err = pgx.ForEachRow(rows, []any{&added, &pos, &item}, func() error {
		// One row more than a side's page says that it goes on, after
		// the page's last.
		switch {
		case added && len(d.Added) == limit:
			d.AddedNext = lastAdded
		case added:
			d.Added, lastAdded = append(d.Added, item), pos
		case len(d.Removed) == limit:
			d.RemovedNext = lastRemoved
		default:
			d.Removed, lastRemoved = append(d.Removed, item), pos
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: diff baselines: %w", err)
	}
	return &d, nil
}
