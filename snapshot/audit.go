package snapshot

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/sqlarg"
	"github.com/searchd/searchd/savedsearch"
)

// The console's audit reads never read a baseline (up to a megabyte) whole;
// every answer is bounded in size.

// Header is a snapshot without its baseline items.
type Header struct {
	ID                 uuid.UUID
	OrganizationID     uuid.UUID
	SavedSearchID      uuid.UUID
	SavedSearchVersion int64
	SavedSearchName    string
	// Brief is the whole brief, or only its query when [Header.BriefCut].
	Brief savedsearch.Brief
	// BriefBytes is the stored brief's size as JSON text.
	BriefBytes int64
	// BaselineItems counts the baseline's items; BaselineCursor is cut to
	// savedsearch.MaxCursorBytes.
	BaselineItems  int64
	BaselineCursor *string
	ContentHash    string
	// CreatedBy is nil when unknown.
	CreatedBy *string
	Origin    string
	CreatedAt time.Time
}

// BriefCut reports whether Brief holds only the query.
func (h *Header) BriefCut() bool { return h.BriefBytes > savedsearch.AuditBriefBytes }

// Header returns snapshot id of org without its baseline items, or [ErrNotFound].
func (s *Store) Header(ctx context.Context, org, id uuid.UUID) (_ *Header, err error) {
	defer dberr.Annotate(&err)
	var h Header
	err = s.db.QueryRow(ctx, snapshotAuditHeader, org, id, savedsearch.AuditBriefBytes).Scan(&h.ID, &h.OrganizationID,
		&h.SavedSearchID, &h.SavedSearchVersion, &h.SavedSearchName, &h.Brief, &h.BriefBytes, &h.BaselineItems,
		&h.BaselineCursor, &h.ContentHash, &h.CreatedBy, &h.Origin, &h.CreatedAt)
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "snapshot: header")
	}
	return &h, nil
}

// BaselineItems returns up to limit (1 to MaxListLimit) baseline items after
// position after, each cut to savedsearch.MaxItemLen (ending in "…"), and
// the next position, 0 on the last page. An unknown snapshot has no items.
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
	// AddedAfter and RemovedAfter are where each side's page starts: 0, or
	// the Next of a previous diff.
	AddedAfter, RemovedAfter int64
	// Limit is each side's page size, 1 to MaxListLimit.
	Limit int
}

// BaselineDiff counts the items added, removed and kept between two
// baselines, with a page of each side.
type BaselineDiff struct {
	// Added are the newer's items the older lacks, in the newer's order;
	// Removed the reverse. Items are cut as in [Store.BaselineItems].
	Added, Removed []string
	// AddedNext and RemovedNext are where to continue; 0 on the last page.
	AddedNext, RemovedNext int64
	// AddedCount, RemovedCount and KeptCount count all items of each kind.
	AddedCount, RemovedCount, KeptCount int64
}

// DiffBaselines compares the baselines of org's snapshots older and newer.
// An unknown snapshot has no items, so check both with [Store.Header] first.
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
