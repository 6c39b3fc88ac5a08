package providerjobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// InboxStats returns the number of pending arrivals and the oldest's age, by
// the database clock.
func (a *Audit) InboxStats(ctx context.Context) (pending int64, oldest time.Duration, err error) {
	return readInboxStats(ctx, a.db, nil)
}

func readInboxStats(ctx context.Context, db Querier, now any) (pending int64, oldest time.Duration, err error) {
	defer dberr.Annotate(&err)
	var secs float64
	if err := db.QueryRow(ctx, inboxStats, now).Scan(&pending, &secs); err != nil {
		return 0, 0, fmt.Errorf("providerjobs: inbox stats: %w", err)
	}
	return pending, time.Duration(secs * float64(time.Second)), nil
}

// InboxListParams filter and page the inbox lists; zero values match all.
type InboxListParams struct {
	Provider string
	// Status keeps the arrivals in it ([Audit.InboxArrivals] only).
	Status InboxStatus
	// Limit is 1 to 200; zero or less is 50. Cursor is the previous page's
	// next cursor, "" for the first.
	Limit  int
	Cursor string
}

// InboxPending returns a page of pending arrivals, next attempt first, and
// the next cursor, or [ErrInvalidCursor].
func (a *Audit) InboxPending(ctx context.Context, p InboxListParams) (_ []InboxEntry, _ string, err error) {
	defer dberr.Annotate(&err)
	return readPage(ctx, a, keyset.List{Name: "providerjobs.inbox.pending"}, "inbox", inboxPendingPage, p.Cursor, p.Limit, nil, []any{sqlarg.Null(p.Provider), nil},
		scanCopied, func(e InboxEntry) keyset.Position { return keyset.Position{CreatedAt: e.LeaseExpiresAt, ID: e.ID} })
}

// InboxArrivals returns a page of arrivals, newest first, and the next cursor,
// or an error wrapping [ErrInvalid] for an unknown status, or [ErrInvalidCursor].
func (a *Audit) InboxArrivals(ctx context.Context, p InboxListParams) (_ []InboxEntry, _ string, err error) {
	defer dberr.Annotate(&err)
	if err := checkInboxStatus(p.Status); err != nil {
		return nil, "", err
	}
	return readPage(ctx, a, keyset.List{Name: "providerjobs.inbox.arrivals"}, "inbox", inboxArrivalPage, p.Cursor, p.Limit, nil,
		[]any{sqlarg.Null(p.Provider), sqlarg.Null(string(p.Status))},
		scanCopied, func(e InboxEntry) keyset.Position { return keyset.Position{CreatedAt: e.ReceivedAt, ID: e.ID} })
}

func scanCopied(r pgx.CollectableRow) (InboxEntry, error) {
	var c Copies
	e, err := scanEntry(r, &c.Duplicates, &c.HashMismatches, &c.PathMismatches, &c.LastAt)
	if err != nil {
		return InboxEntry{}, err
	}
	e.Copies = c
	return *e, nil
}

// inboxPaged wraps a page query with each arrival's copy counters.
func inboxPaged(page, order string) string {
	return `
SELECT ` + inboxColumns + `,
	coalesce(c.duplicates, 0), coalesce(c.hash_mismatches, 0), coalesce(c.path_mismatches, 0), c.last_copy_at
FROM (` + page + `) i
LEFT JOIN agent.provider_inbox_copies c ON c.organization_id = i.organization_id AND c.inbox_id = i.id
ORDER BY ` + order
}

// inboxPendingPage: $1 lease_expires_at, $2 id (the cursor), $3 limit,
// $4 provider or NULL; $5 unused.
var inboxPendingPage = inboxPaged(`
SELECT *
FROM agent.provider_inbox i
WHERE i.status = 'pending' AND ($4::text IS NULL OR i.provider = $4::text) AND $5::text IS NULL
	AND (i.lease_expires_at, i.id) > (coalesce($1::timestamptz, '-infinity'),
		coalesce($2::uuid, '00000000-0000-0000-0000-000000000000'))
ORDER BY i.lease_expires_at, i.id
LIMIT $3`, `i.lease_expires_at, i.id`)

// inboxArrivalPage: $1 received_at, $2 id (the cursor), $3 limit,
// $4 provider, $5 status; NULL for any.
var inboxArrivalPage = inboxPaged(`
SELECT *
FROM agent.provider_inbox i
WHERE ($4::text IS NULL OR i.provider = $4::text) AND ($5::text IS NULL OR i.status = $5::text)
	AND (i.received_at, i.id) < (coalesce($1::timestamptz, 'infinity'),
		coalesce($2::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY i.received_at DESC, i.id DESC
LIMIT $3`, `i.received_at DESC, i.id DESC`)
