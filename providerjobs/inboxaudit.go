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

// The inbox as an operator reads it in the console: the backlog the
// applier has not finished, and the arrivals as they landed. Every
// provider's and organization's (an arrival of an unknown job has none).

// InboxStats returns the number of pending arrivals and the age of the oldest,
// by the database clock: the applier's lag, as its every poll reports it to
// the [InboxObserver].
func (a *Audit) InboxStats(ctx context.Context) (pending int64, oldest time.Duration, err error) {
	return readInboxStats(ctx, a.db, nil)
}

// readInboxStats is [Audit.InboxStats] on db at now (nil: the database's
// now()).
func readInboxStats(ctx context.Context, db Querier, now any) (pending int64, oldest time.Duration, err error) {
	defer dberr.Annotate(&err)
	rows, _ := db.Query(ctx, inboxStats, now)
	var secs float64
	if _, err := pgx.ForEachRow(rows, []any{&pending, &secs}, func() error { return nil }); err != nil {
		return 0, 0, fmt.Errorf("providerjobs: inbox stats: %w", err)
	}
	return pending, time.Duration(secs * float64(time.Second)), nil
}

// InboxListParams narrow and page the inbox lists; zero filters match
// every arrival.
type InboxListParams struct {
	Provider string
	// Status keeps the arrivals in it ([Audit.InboxArrivals] only).
	Status InboxStatus
	// Limit is 1 to 200; zero or less is 50. Cursor is the next cursor of
	// the previous page, "" for the first.
	Limit  int
	Cursor string
}

// InboxPending returns a page of the pending arrivals, the one whose next
// attempt is due first at the top (by the inbox's pending index), and the
// next cursor. It returns [ErrInvalidCursor] for a cursor it did not write.
func (a *Audit) InboxPending(ctx context.Context, p InboxListParams) (_ []InboxEntry, _ string, err error) {
	defer dberr.Annotate(&err)
	return readPage(ctx, a, keyset.List{Name: "providerjobs.inbox.pending"}, "inbox", inboxPendingPage, p.Cursor, p.Limit, nil, []any{sqlarg.Null(p.Provider), nil},
		scanCopied, func(e InboxEntry) keyset.Position { return keyset.Position{CreatedAt: e.LeaseExpiresAt, ID: e.ID} })
}

// InboxArrivals returns a page of the arrivals, the newest first, and the
// next cursor. It returns an error wrapping [ErrInvalid] for an unknown
// status and [ErrInvalidCursor] for a cursor it did not write.
func (a *Audit) InboxArrivals(ctx context.Context, p InboxListParams) (_ []InboxEntry, _ string, err error) {
	defer dberr.Annotate(&err)
	if err := checkInboxStatus(p.Status); err != nil {
		return nil, "", err
	}
	return readPage(ctx, a, keyset.List{Name: "providerjobs.inbox.arrivals"}, "inbox", inboxArrivalPage, p.Cursor, p.Limit, nil,
		[]any{sqlarg.Null(p.Provider), sqlarg.Null(string(p.Status))},
		scanCopied, func(e InboxEntry) keyset.Position { return keyset.Position{CreatedAt: e.ReceivedAt, ID: e.ID} })
}

// scanCopied reads a row of an inbox page: an arrival and its copies.
func scanCopied(r pgx.CollectableRow) (InboxEntry, error) {
	var c Copies
	e, err := scanEntry(r, &c.Duplicates, &c.HashMismatches, &c.PathMismatches, &c.LastAt)
	if err != nil {
		return InboxEntry{}, err
	}
	e.Copies = c
	return *e, nil
}

// The two inbox pages read a page of arrivals by an index range, then the
// copy counters of each (agent.provider_inbox_copies, by its primary key):
// inboxPaged wraps the range's SELECT.
func inboxPaged(page, order string) string {
	return `
SELECT ` + inboxColumns + `,
	coalesce(c.duplicates, 0), coalesce(c.hash_mismatches, 0), coalesce(c.path_mismatches, 0), c.last_copy_at
FROM (` + page + `) i
LEFT JOIN agent.provider_inbox_copies c ON c.organization_id = i.organization_id AND c.inbox_id = i.id
ORDER BY ` + order
}

// inboxPendingPage reads pending arrivals by their lease (the next attempt
// due) after ($1 lease_expires_at, $2 id), on provider_inbox_pending_idx.
// $3 limit, $4 provider or NULL; $5 unused (NULL).
var inboxPendingPage = inboxPaged(`
SELECT *
FROM agent.provider_inbox i
WHERE i.status = 'pending' AND ($4::text IS NULL OR i.provider = $4::text) AND $5::text IS NULL
	AND (i.lease_expires_at, i.id) > (coalesce($1::timestamptz, '-infinity'),
		coalesce($2::uuid, '00000000-0000-0000-0000-000000000000'))
ORDER BY i.lease_expires_at, i.id
LIMIT $3`, `i.lease_expires_at, i.id`)

// inboxArrivalPage reads arrivals newest first after ($1 received_at,
// $2 id), on provider_inbox_received_at_idx. $3 limit, $4 provider, $5
// status: NULL for any.
var inboxArrivalPage = inboxPaged(`
SELECT *
FROM agent.provider_inbox i
WHERE ($4::text IS NULL OR i.provider = $4::text) AND ($5::text IS NULL OR i.status = $5::text)
	AND (i.received_at, i.id) < (coalesce($1::timestamptz, 'infinity'),
		coalesce($2::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
ORDER BY i.received_at DESC, i.id DESC
LIMIT $3`, `i.received_at DESC, i.id DESC`)
