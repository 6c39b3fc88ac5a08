package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// Errors. Methods that run SQL return transient database failures as
// errs.Unavailable (internal/dberr).
var (
	// ErrCompletedClaim refuses releasing a completed claim: repeats
	// replay it, and deleting it would let a repeat redo the effect.
	ErrCompletedClaim = errors.New("a completed claim is never released")
	// ErrClaimChanged reports a claim that changed since it was read.
	ErrClaimChanged = errors.New("the claim changed since it was read; nothing was released")
	// ErrLeaseLive refuses a live lease under
	// [ReleaseParams.RequirePassedLease].
	ErrLeaseLive = errors.New("the claim's lease is live: its holder may still be working")
	// ErrNotFound reports a claim that is not stored.
	ErrNotFound = errs.New(errs.NotFound, "operator: claim not found")
	// ErrInvalid is wrapped by every input error, returned before any SQL.
	ErrInvalid = errs.New(errs.Invalid, "operator: invalid input")
	// ErrInvalidCursor reports a page cursor this package did not write.
	ErrInvalidCursor = keyset.InvalidCursor("operator")
)

// Limits of a release's record.
const (
	// MaxReasonLen bounds a release's reason, in characters.
	MaxReasonLen = 500
	// MaxActorLen bounds the actor, in bytes (a token's sub).
	MaxActorLen = 255
)

// ReleaseRetention is how long a force-release record is kept: as long
// as a Run.
const ReleaseRetention = 396 * 24 * time.Hour

// Via names the tool a release was made with.
const (
	ViaCLI     = "cli"
	ViaConsole = "console"
)

// Page sizes of the lists.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
)

// CheckReason returns reason trimmed, or an error wrapping [ErrInvalid]
// when it is empty, too long, not UTF-8 or several lines.
func CheckReason(reason string) (string, error) {
	why := strings.TrimSpace(reason)
	switch {
	case why == "":
		return "", fmt.Errorf("%w: a reason is required: say why the claim is released; it is recorded", ErrInvalid)
	case !utf8.ValidString(why) || utf8.RuneCountInString(why) > MaxReasonLen:
		return "", fmt.Errorf("%w: the reason must be valid UTF-8 of at most %d characters", ErrInvalid, MaxReasonLen)
	case strings.ContainsFunc(why, unicode.IsControl):
		return "", fmt.Errorf("%w: the reason must be one line, without control characters", ErrInvalid)
	}
	return why, nil
}

// Store reads claims across organizations and force-releases them. It is
// safe for concurrent use.
type Store struct {
	db      *pgxpool.Pool
	clock   *dbclock.Clock
	cursors keyset.Key
}

// NewStore returns a store on db ([Store.Overview] uses two connections at
// once). A nil clock means the database's now().
func NewStore(db *pgxpool.Pool, clock *dbclock.Clock) *Store { return &Store{db: db, clock: clock} }

// Cursors returns a copy of s that signs its list cursors with k.
func (s *Store) Cursors(k keyset.Key) *Store {
	c := *s
	c.cursors = k
	return &c
}

// Claim returns claim id of any organization, with the read's database
// time in ObservedAt. It returns [ErrNotFound] when none is stored.
func (s *Store) Claim(ctx context.Context, id uuid.UUID) (_ *idempotency.Record, err error) {
	defer dberr.Annotate(&err)
	rec, err := scanRecord(s.db.QueryRow(ctx, claimGetByID, id, s.clock.Arg()))
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "operator: claim")
	}
	return rec, nil
}

// ReleaseParams are the inputs of [Store.ForceRelease].
type ReleaseParams struct {
	// Actor is who releases; required, at most [MaxActorLen] bytes.
	Actor string
	// Reason says why; see [CheckReason]. Required.
	Reason string
	// Via is ViaCLI or ViaConsole.
	Via string
	// RequirePassedLease refuses a live lease with [ErrLeaseLive]; the
	// console sets it, the CLI does not.
	RequirePassedLease bool
}

// Release is the record of one force-release.
type Release struct {
	ID             uuid.UUID
	ClaimID        uuid.UUID
	OrganizationID uuid.UUID
	Scope          string
	Key            string
	RequestHash    string
	ClaimedAt      time.Time
	LeaseExpiresAt time.Time
	LeaseLive      bool
	Actor          string
	Reason         string
	Via            string
	ReleasedAt     time.Time
}

// ForceRelease deletes rec if it is processing and still holds the lease
// token it was read with, and records the release in the same
// transaction. It returns [ErrCompletedClaim], [ErrLeaseLive] (with
// p.RequirePassedLease), an error wrapping [ErrInvalid] for bad params
// (before any SQL), or [ErrClaimChanged] when the claim moved on (nothing
// is recorded then).
func (s *Store) ForceRelease(ctx context.Context, rec *idempotency.Record, p ReleaseParams) (_ *Release, err error) {
	defer dberr.Annotate(&err)
	why, err := CheckReason(p.Reason)
	if err != nil {
		return nil, err
	}
	switch {
	case p.Actor == "" || len(p.Actor) > MaxActorLen || !utf8.ValidString(p.Actor) || strings.ContainsRune(p.Actor, 0):
		return nil, fmt.Errorf("%w: the actor must be 1 to %d bytes of UTF-8", ErrInvalid, MaxActorLen)
	case p.Via != ViaCLI && p.Via != ViaConsole:
		return nil, fmt.Errorf("%w: via %q is neither %s nor %s", ErrInvalid, p.Via, ViaCLI, ViaConsole)
	}
	if rec.Status != idempotency.StatusProcessing {
		return nil, fmt.Errorf("claim %s is %s: %w; it stores the answer every repeat of key %q replays until %s, when the sweeper deletes it",
			rec.ID, rec.Status, ErrCompletedClaim, rec.Key, rec.RetainUntil.UTC().Format(time.RFC3339))
	}
	if p.RequirePassedLease && rec.LeaseLive() {
		return nil, fmt.Errorf("claim %s: %w until %s; it is reclaimable, and releasable here, once the lease passes",
			rec.ID, ErrLeaseLive, rec.LeaseExpiresAt.UTC().Format(time.RFC3339))
	}
	r := &Release{
		ID: ids.New(), ClaimID: rec.ID, OrganizationID: rec.OrganizationID, Scope: rec.Scope, Key: rec.Key,
		RequestHash: rec.RequestHash, ClaimedAt: rec.ClaimedAt, LeaseExpiresAt: rec.LeaseExpiresAt,
		LeaseLive: rec.LeaseLive(), Actor: p.Actor, Reason: why, Via: p.Via,
	}
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		// Fenced by the lease token read: a claim that moved on is left alone.
		released, err := idempotency.NewRepository(tx, s.clock).Release(ctx, rec.OrganizationID, rec.ID, rec.LeaseToken)
		if err != nil {
			return err
		}
		if !released {
			return ErrClaimChanged
		}
		if err := tx.QueryRow(ctx, releaseInsert, pgx.StrictNamedArgs{
			"id": r.ID, "claim_id": r.ClaimID, "org": r.OrganizationID, "scope": r.Scope, "key": r.Key,
			"request_hash": r.RequestHash, "claimed_at": r.ClaimedAt, "lease_expires_at": r.LeaseExpiresAt,
			"lease_live": r.LeaseLive, "actor": r.Actor, "reason": r.Reason, "via": r.Via, "now": s.clock.Arg(),
		}).Scan(&r.ReleasedAt); err != nil {
			return fmt.Errorf("record the release: %w", err)
		}
		_, err = tx.Exec(ctx, releasePrune, ReleaseRetention.Microseconds(), s.clock.Arg())
		return err
	})
	switch {
	case errors.Is(err, ErrClaimChanged):
		return nil, fmt.Errorf("claim %s: %w (it was completed, released, or taken over by a worker)", rec.ID, ErrClaimChanged)
	case err != nil:
		return nil, fmt.Errorf("operator: force-release: %w", err)
	}
	return r, nil
}

// ScopeCount is how many claims one scope holds, by state.
type ScopeCount struct {
	Scope string
	// Completed counts completed claims still retained.
	Completed int64
	// InFlight counts processing claims with a live lease.
	InFlight int64
	// Stuck counts retained processing claims whose lease passed.
	Stuck int64
	// Expired counts rows past retention, awaiting the sweeper.
	Expired int64
}

// Overview is every scope's claim counts and the chart's hourly events.
type Overview struct {
	// Counts are per scope, in scope order.
	Counts []ScopeCount
	// Buckets are the last hours' events; empty hours are absent.
	Buckets []Bucket
}

// Overview counts every scope's claims by state, and the events of the
// last hours (1 to 168, current hour included): claims, drops by reason,
// and force-releases.
func (s *Store) Overview(ctx context.Context, hours int) (_ *Overview, err error) {
	defer dberr.Annotate(&err)
	if hours < 1 || hours > 168 {
		return nil, fmt.Errorf("%w: hours %d: must be 1 to 168", ErrInvalid, hours)
	}
	// Read the events on a second connection while the claims are scanned.
	var (
		events    []Bucket
		eventsErr error
		wg        sync.WaitGroup
	)
	wg.Go(func() { events, eventsErr = s.hourlyEvents(ctx, hours) })
	defer wg.Wait()
	rows, _ := s.db.Query(ctx, claimOverview, s.clock.Arg(), hours)
	byScope := map[string]*ScopeCount{}
	hourly := map[[2]any]int64{}
	var (
		scope, status              string
		slot                       int
		since                      time.Time
		expired, live, total, rest int64
	)
	_, err = pgx.ForEachRow(rows, []any{&scope, &status, &slot, &since, &expired, &live, &total}, func() error {
		c := byScope[scope]
		if c == nil {
			c = &ScopeCount{Scope: scope}
			byScope[scope] = c
		}
		c.Expired += expired
		rest = total - expired
		// slot 0 is before the chart; slot i is its hour i-1.
		hour := since.Add(time.Duration(slot-1) * time.Hour)
		add := func(state string, n int64) {
			if slot > 0 && n > 0 {
				hourly[[2]any{hour, state}] += n
			}
		}
		if status == "completed" {
			c.Completed += rest
			add("completed", rest)
			return nil
		}
		c.InFlight += live
		c.Stuck += rest - live
		add("in_flight", live)
		add("stuck", rest-live)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("operator: overview: %w", err)
	}
	o := &Overview{}
	for _, c := range byScope {
		o.Counts = append(o.Counts, *c)
	}
	slices.SortFunc(o.Counts, func(a, b ScopeCount) int { return strings.Compare(a.Scope, b.Scope) })
	for k, n := range hourly {
		o.Buckets = append(o.Buckets, Bucket{Kind: "claim", Hour: k[0].(time.Time), What: k[1].(string), Count: n})
	}
	wg.Wait()
	if eventsErr != nil {
		return nil, eventsErr
	}
	o.Buckets = append(o.Buckets, events...)
	return o, nil
}

// hourlyEvents reads the drops and force-releases of the last hours.
func (s *Store) hourlyEvents(ctx context.Context, hours int) ([]Bucket, error) {
	rows, _ := s.db.Query(ctx, eventHourly, s.clock.Arg(), hours)
	events, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Bucket])
	if err != nil {
		return nil, fmt.Errorf("operator: overview: %w", err)
	}
	return events, nil
}

// ClaimFilter narrows the claim lists; zero fields match all. Key needs
// both organization and scope, else the error wraps [ErrInvalid].
type ClaimFilter struct {
	OrganizationID uuid.UUID
	Scope          string
	Key            string
}

// PageParams are a page's size and position.
type PageParams struct {
	// Limit <= 0 means DefaultPageSize; it is capped at MaxPageSize.
	Limit int
	// Cursor is the next cursor of the previous page; "" for the first.
	Cursor string
}

// InFlight returns a page of claims with a live lease, soonest to pass
// first, and the next cursor ("" on the last page). Time left is
// LeaseExpiresAt minus ObservedAt. It returns [ErrInvalidCursor] for a
// foreign cursor.
func (s *Store) InFlight(ctx context.Context, f ClaimFilter, p PageParams) ([]idempotency.Record, string, error) {
	return s.processing(ctx, true, f, p)
}

// Stuck returns a page of retained claims whose lease passed, longest
// stuck first, and the next cursor. It returns [ErrInvalidCursor] for a
// foreign cursor.
func (s *Store) Stuck(ctx context.Context, f ClaimFilter, p PageParams) ([]idempotency.Record, string, error) {
	return s.processing(ctx, false, f, p)
}

func (s *Store) processing(ctx context.Context, live bool, f ClaimFilter, p PageParams) (_ []idempotency.Record, _ string, err error) {
	defer dberr.Annotate(&err)
	// The operator's lists run across organizations: no Org.
	list := keyset.List{Name: "operator.stuck"}
	if live {
		list.Name = "operator.inflight"
	}
	q, err := s.cursors.Read(list, p.Cursor, p.Limit, DefaultPageSize, MaxPageSize)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	if f.Key != "" {
		return s.processingByKey(ctx, live, f, q.At != nil)
	}
	query := claimStuckPage
	if live {
		query = claimInFlightPage
	}
	return keyset.Query(ctx, s.db, "operator: processing claims", q, keyset.Value(scanRecord),
		func(r idempotency.Record) keyset.Position {
			return keyset.Position{CreatedAt: r.LeaseExpiresAt, ID: r.ID}
		},
		query, s.clock.Arg(), q.At, q.ID, q.Limit+1, sqlarg.Null(f.OrganizationID), sqlarg.Null(f.Scope))
}

// processingByKey is the one-claim page of a key, for lists filtered by
// Key.
func (s *Store) processingByKey(ctx context.Context, live bool, f ClaimFilter, after bool) ([]idempotency.Record, string, error) {
	if f.OrganizationID == uuid.Nil || f.Scope == "" {
		return nil, "", fmt.Errorf("%w: a key names a claim within an organization and a scope: give both", ErrInvalid)
	}
	if after {
		return nil, "", nil // a key's page has one claim at most: nothing after it
	}
	rec, err := scanRecord(s.db.QueryRow(ctx, claimByKey, f.OrganizationID, f.Scope, f.Key, s.clock.Arg()))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("operator: claim by key: %w", err)
	case rec.Status != idempotency.StatusProcessing || rec.LeaseLive() != live || (!live && !rec.Retained()):
		return nil, "", nil
	}
	return []idempotency.Record{*rec}, "", nil
}

// Bucket is one hour's count of one kind of event.
type Bucket struct {
	// Kind is "claim", "drop" or "release".
	Kind string
	Hour time.Time
	// What is a claim's state now (completed, in_flight, stuck), a drop's
	// reason, or "released".
	What  string
	Count int64
}

// ReleaseFilter narrows [Store.Releases]; zero fields match every release.
type ReleaseFilter struct {
	OrganizationID uuid.UUID
	Actor          string
	// ClaimID keeps the releases of one claim; uuid.Nil for any.
	ClaimID uuid.UUID
}

// Releases returns a page of force-releases, newest first, and the next
// cursor. It returns [ErrInvalidCursor] for a foreign cursor.
func (s *Store) Releases(ctx context.Context, f ReleaseFilter, p PageParams) (_ []Release, _ string, err error) {
	defer dberr.Annotate(&err)
	q, err := s.cursors.Read(keyset.List{Name: "operator.releases"}, p.Cursor, p.Limit, DefaultPageSize, MaxPageSize)
	if err != nil {
		return nil, "", ErrInvalidCursor
	}
	return keyset.Query(ctx, s.db, "operator: releases", q, pgx.RowToStructByPos[Release],
		func(r Release) keyset.Position { return keyset.Position{CreatedAt: r.ReleasedAt, ID: r.ID} },
		releasePage, q.At, q.ID, q.Limit+1, sqlarg.Null(f.OrganizationID), sqlarg.Null(f.Actor), sqlarg.Null(f.ClaimID))
}

// scanRecord scans a claim read with claimColumns and the clock.
func scanRecord(row pgx.Row) (*idempotency.Record, error) {
	return idempotency.ScanRecord(row, false, true)
}
