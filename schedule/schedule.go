package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/internal/sqlarg"
)

// Errors carry the kinds of package errs.
var (
	// ErrNotFound reports a saved search with no schedule.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "schedule: the saved search has no schedule",
		Detail: "this saved search has no schedule"}
	// ErrSavedSearchNotFound reports a saved search the organization does
	// not have, or has archived when the change would start it.
	ErrSavedSearchNotFound = &errs.Error{Kind: errs.NotFound, Message: "schedule: saved search not found",
		Detail: "no such saved search in your organization (a schedule is set on a live one)"}
	// ErrInvalid is wrapped by every refusal of a schedule's fields.
	ErrInvalid = errs.New(errs.Invalid, "schedule: invalid schedule")
	// ErrInvalidCursor reports a list cursor this package did not write.
	ErrInvalidCursor = keyset.InvalidCursor("schedule")
	// ErrTooMany reports a new schedule beyond [Store.Limit].
	ErrTooMany = &errs.Error{Kind: errs.Conflict, Code: "schedule_limit", Message: "schedule: the organization has as many schedules as it may",
		Detail: "your organization has as many schedules as it may (SEARCHD_SCHEDULE_MAX_PER_ORG); remove one first"}
	// ErrVersionMismatch is wrapped by every [*VersionMismatchError].
	ErrVersionMismatch = &errs.Error{Kind: errs.PreconditionFailed, Message: "schedule: version precondition failed",
		Detail: "the schedule changed since the version If-Match names, or there is none; " +
			"read it again (its ETag) and reapply the change"}
)

// VersionMismatchError reports a change refused by its version precondition
// (If-Match); Current is the version judged, 0 if none.
type VersionMismatchError struct{ Current int64 }

func (e *VersionMismatchError) Error() string {
	if e.Current == 0 {
		return "schedule: version precondition failed; the saved search has no schedule"
	}
	return fmt.Sprintf("schedule: version precondition failed; the current version is %d", e.Current)
}

// Unwrap returns [ErrVersionMismatch].
func (e *VersionMismatchError) Unwrap() error { return ErrVersionMismatch }

// CurrentVersion returns Current.
func (e *VersionMismatchError) CurrentVersion() int64 { return e.Current }

// Schedule is a saved search's schedule.
type Schedule struct {
	SavedSearchID  uuid.UUID `json:"saved_search_id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	// IntervalSeconds and Cron: exactly one is set.
	IntervalSeconds *int64  `json:"interval_seconds"`
	Cron            *string `json:"cron"`
	TimeZone        string  `json:"time_zone"`
	// StartAt is in whole seconds.
	StartAt        time.Time `json:"start_at"`
	CatchUpSeconds int64     `json:"catch_up_seconds"`
	Paused         bool      `json:"paused"`
	// MaxResults and Note are its Runs' start options.
	MaxResults int    `json:"max_results"`
	Note       string `json:"note"`
	// NextDueAt is nil while paused or when it will not come due again.
	NextDueAt *time.Time `json:"next_due_at"`
	Version   int64      `json:"version"`
	// UpdatedBy is recorded on its starts; nil when unknown.
	UpdatedBy *string   `json:"updated_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SetParams are the inputs of [Store.Set]. A set replaces the whole schedule:
// omitted fields take their defaults, except StartAt, which keeps the stored one.
type SetParams struct {
	// IntervalSeconds is 60 to 31622400; exactly one of it and Cron is set.
	IntervalSeconds *int64 `json:"interval_seconds"`
	// Cron is five-field cron or a descriptor, at most 100 bytes, without a
	// time zone prefix or @every.
	Cron *string `json:"cron"`
	// TimeZone is an IANA zone name, at most 64 bytes; default UTC.
	TimeZone *string `json:"time_zone"`
	// StartAt is cut to the second; default the stored one, or now rounded
	// up for a new schedule. The past is never back-filled.
	StartAt *time.Time `json:"start_at"`
	// CatchUpSeconds is 60 to 604800; default 86400.
	CatchUpSeconds *int64 `json:"catch_up_seconds"`
	Paused         *bool  `json:"paused"`
	// MaxResults and Note have a start's limits and defaults
	// (admission.StartOptions).
	MaxResults *int    `json:"max_results"`
	Note       *string `json:"note"`

	// Actor is recorded as updated_by and on its starts; empty records NULL.
	Actor string `json:"-"`
	// IfMatch is a version precondition judged under the row lock; failing
	// it, or no schedule, returns a [*VersionMismatchError] and changes nothing.
	IfMatch func(version int64) bool `json:"-"`
}

// Validate returns an error wrapping [ErrInvalid] naming every refused field,
// or nil. [Store.Set] also refuses a cron expression that never comes due.
func (p SetParams) Validate() error {
	_, _, err := p.settings()
	return err
}

// settings applies p's defaults and returns the settings (a zero StartAt
// when p sets none) and the cadence.
func (p SetParams) settings() (Schedule, cadence, error) {
	var fields []errs.Field
	bad := func(name, msg string) { fields = append(fields, errs.Field{Name: name, Message: msg}) }
	opts := admission.StartOptions{MaxResults: valueOr(p.MaxResults, 0), Note: valueOr(p.Note, "")}.Normalize()
	st := Schedule{IntervalSeconds: p.IntervalSeconds, Cron: p.Cron, TimeZone: valueOr(p.TimeZone, DefaultTimeZone),
		CatchUpSeconds: valueOr(p.CatchUpSeconds, int64(DefaultCatchUp/time.Second)), Paused: valueOr(p.Paused, false),
		MaxResults: opts.MaxResults, Note: opts.Note}
	if p.StartAt != nil {
		st.StartAt = p.StartAt.UTC().Truncate(time.Second)
		if st.StartAt.Year() < 1970 || st.StartAt.Year() > 9999 {
			bad("start_at", "must be a time from 1970 to 9999")
		}
	}
	c := p.checkCadence(bad)
	var err error
	if c.loc, err = loadZone(st.TimeZone); err != nil {
		bad("time_zone", err.Error())
	}
	if p.MaxResults != nil && (*p.MaxResults < 1 || *p.MaxResults > admission.MaxMaxResults) {
		bad("max_results", fmt.Sprintf("must be from 1 to %d", admission.MaxMaxResults))
	}
	if p.Note != nil && utf8.RuneCountInString(*p.Note) > admission.MaxNoteLen {
		bad("note", fmt.Sprintf("must be at most %d characters", admission.MaxNoteLen))
	}
	if st.CatchUpSeconds < int64(MinCatchUp/time.Second) || st.CatchUpSeconds > int64(MaxCatchUp/time.Second) {
		bad("catch_up_seconds", fmt.Sprintf("must be from %d to %d (a minute to a week)",
			int64(MinCatchUp/time.Second), int64(MaxCatchUp/time.Second)))
	}
	if len(fields) > 0 {
		return st, cadence{}, &errs.Error{Kind: errs.Invalid, Message: "schedule: invalid schedule: " + fields[0].Name +
			" " + fields[0].Message, Fields: fields, Err: ErrInvalid}
	}
	c.start = st.StartAt
	return st, c, nil
}

// checkCadence reports p's cadence fields to bad and returns their cadence.
func (p SetParams) checkCadence(bad func(name, msg string)) (c cadence) {
	switch {
	case p.IntervalSeconds == nil && p.Cron == nil:
		bad("interval_seconds", "is required when cron is absent")
		bad("cron", "is required when interval_seconds is absent")
	case p.IntervalSeconds != nil && p.Cron != nil:
		bad("cron", "must be absent when interval_seconds is set: a schedule has one cadence")
	case p.IntervalSeconds != nil:
		if *p.IntervalSeconds < int64(MinInterval/time.Second) || *p.IntervalSeconds > int64(MaxInterval/time.Second) {
			bad("interval_seconds", fmt.Sprintf("must be from %d to %d (a minute to 366 days)",
				int64(MinInterval/time.Second), int64(MaxInterval/time.Second)))
		}
		c.interval = time.Duration(*p.IntervalSeconds) * time.Second
	default:
		var err error
		if c.spec, err = parseCron(*p.Cron); err != nil {
			bad("cron", err.Error())
		}
	}
	return c
}

// Store reads and writes schedules and occurrences. It is safe for concurrent use.
type Store struct {
	db      *pgxpool.Pool
	clock   *dbclock.Clock
	most    int
	cursors keyset.Key
}

// DefaultMaxPerOrganization is the default schedule limit per
// organization, so no organization fills every drain tick.
const DefaultMaxPerOrganization = 1000

// NewStore returns a store on db at clock (nil: the database's own).
func NewStore(db *pgxpool.Pool, clock *dbclock.Clock) *Store {
	return &Store{db: db, clock: clock, most: DefaultMaxPerOrganization}
}

// Limit returns a copy of s allowing most schedules per organization (at least 1).
func (s *Store) Limit(most int) *Store {
	c := *s
	c.most = max(most, 1)
	return &c
}

// Cursors returns a copy of s that signs its cursors with k; the default
// zero key is accepted by no other process.
func (s *Store) Cursors(k keyset.Key) *Store {
	c := *s
	c.cursors = k
	return &c
}

// Get returns the schedule of org's saved search id, live or archived, or
// [ErrNotFound].
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (_ *Schedule, err error) {
	defer dberr.Annotate(&err)
	sc, err := scanSchedule(s.db.Query(ctx, scheduleGet, org, id))
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "schedule: get")
	}
	return sc, nil
}

// Set creates or replaces the schedule of org's live saved search id and
// reports whether it created it; the current values change nothing, not
// even the version. A new or changed cadence, or a resume, first comes due
// at or after now and after existing occurrences. Errors: [ErrInvalid]
// (also for a cron expression that never comes due),
// [ErrSavedSearchNotFound], [*VersionMismatchError].
func (s *Store) Set(ctx context.Context, org, id uuid.UUID, p SetParams) (_ *Schedule, created bool, err error) {
	defer dberr.Annotate(&err)
	st, c, err := p.settings()
	if err != nil {
		return nil, false, err
	}
	var sc *Schedule
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		sc, created, err = s.setIn(ctx, tx, org, id, p, st, c)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return sc, created, nil
}

// setHashDomain is stored in claims, so it must not change.
const setHashDomain = "searchd.schedule.set.v1"

// SetOnce is [Store.Set] at most once per idempotency key, the write and the
// claim's completion committing together; a repeat returns the schedule as
// it is now with replayed true. Errors: those of [Store.Set], [ErrNotFound]
// for a repeat whose schedule was removed, [idempotency.ErrKeyReused], and
// [*idempotency.InFlightError] while the first is in flight.
func (s *Store) SetOnce(ctx context.Context, plane *idempotency.Service, org, id uuid.UUID, key string, p SetParams) (_ *Schedule, created, replayed bool, err error) {
	defer dberr.Annotate(&err)
	st, c, err := p.settings()
	if err != nil {
		return nil, false, false, err
	}
	// Hash the saved search and p's json fields (not Actor or IfMatch).
	hash, err := idempotency.RequestHash(setHashDomain, struct {
		SavedSearchID uuid.UUID `json:"saved_search_id"`
		SetParams
	}{id, p})
	if err != nil {
		return nil, false, false, err
	}
	var sc *Schedule
	_, first, err := plane.CreateOnce(ctx, s.db, idempotency.KeyedCreate{
		Org: org, Scope: idempotency.ScopeScheduleSet, Key: key, RequestHash: hash, ResourceType: "saved_search_schedule",
	}, func(ctx context.Context, tx pgx.Tx) (string, error) {
		var err error
		sc, created, err = s.setIn(ctx, tx, org, id, p, st, c)
		if err != nil {
			return "", err
		}
		return id.String(), nil
	})
	if err != nil {
		return nil, false, false, err
	}
	if first {
		return sc, created, false, nil
	}
	if sc, err = s.Get(ctx, org, id); err != nil {
		return nil, false, true, err
	}
	return sc, false, true, nil
}

// Pause pauses and returns the schedule; an open occurrence is refused
// (schedule_paused) when taken. ifMatch is as [SetParams.IfMatch]. Errors:
// [ErrNotFound], [ErrSavedSearchNotFound], [*VersionMismatchError].
func (s *Store) Pause(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (_ *Schedule, err error) {
	defer dberr.Annotate(&err)
	return s.change(ctx, org, id, ifMatch, func(tx pgx.Tx, cur *Schedule, _ readState) (*Schedule, error) {
		if cur.Paused {
			return cur, nil
		}
		st := *cur
		st.Paused = true
		return s.write(ctx, tx, scheduleUpdate, cur, st, nil, nil)
	})
}

// Resume resumes and returns the schedule, next due at or after now. Errors
// as [Store.Pause], and [ErrInvalid] when the cron never comes due again.
func (s *Store) Resume(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (_ *Schedule, err error) {
	defer dberr.Annotate(&err)
	return s.change(ctx, org, id, ifMatch, func(tx pgx.Tx, cur *Schedule, rs readState) (*Schedule, error) {
		if !cur.Paused {
			return cur, nil
		}
		c, err := newCadence(cur.IntervalSeconds, cur.Cron, cur.TimeZone, cur.StartAt)
		if err != nil {
			return nil, err
		}
		next, err := firstDue(c, rs)
		if err != nil {
			return nil, err
		}
		st := *cur
		st.Paused = false
		return s.write(ctx, tx, scheduleUpdate, cur, st, &next, nil)
	})
}

// Remove deletes the schedule of org's saved search id, live or archived;
// its occurrences stay, an open one refused (schedule_removed) when taken.
// Errors: [ErrNotFound], [*VersionMismatchError].
func (s *Store) Remove(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (err error) {
	defer dberr.Annotate(&err)
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		cur, err := scanSchedule(tx.Query(ctx, scheduleLock, org, id))
		if err != nil {
			return sqlarg.RowError(err, ErrNotFound, "schedule: remove")
		}
		if err := precondition(cur, ifMatch); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, scheduleDelete, org, id); err != nil {
			return fmt.Errorf("schedule: remove: %w", err)
		}
		return nil
	})
}

// readState is read under the lock before a change: the clock and the latest
// occurrence, which a new first occurrence must follow.
type readState struct {
	now     time.Time
	lastDue *time.Time
}

// change runs fn on the locked schedule in a transaction, after ifMatch.
func (s *Store) change(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool,
	fn func(tx pgx.Tx, cur *Schedule, rs readState) (*Schedule, error)) (*Schedule, error) {
	var out *Schedule
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		cur, rs, err := s.lock(ctx, tx, org, id, ifMatch, true)
		if err != nil {
			return err
		}
		out, err = fn(tx, cur, rs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// setIn sets p, whose settings st and cadence c are valid, in tx.
func (s *Store) setIn(ctx context.Context, tx pgx.Tx, org, id uuid.UUID, p SetParams, st Schedule, c cadence) (*Schedule, bool, error) {
	// A second attempt follows a create another writer won between our lock
	// and insert; it keeps the start the first settled on.
	for range 2 {
		sc, created, err := s.setOnce(ctx, tx, org, id, p, &st, &c)
		if !errors.Is(err, errCreatedMeanwhile) {
			return sc, created, err
		}
	}
	return nil, false, errors.New("schedule: set: the schedule was created and removed under this change")
}

var errCreatedMeanwhile = errors.New("schedule: created meanwhile")

// setOnce is one attempt of setIn; errCreatedMeanwhile when its insert lost.
func (s *Store) setOnce(ctx context.Context, tx pgx.Tx, org, id uuid.UUID, p SetParams, st *Schedule, c *cadence) (*Schedule, bool, error) {
	cur, rs, err := s.lock(ctx, tx, org, id, p.IfMatch, false)
	if err != nil {
		return nil, false, err
	}
	settleStart(st, cur, rs.now)
	c.start = st.StartAt
	if cur != nil && sameSettings(cur, *st) {
		return cur, false, nil
	}
	next, err := nextDue(*c, *st, cur, rs)
	if err != nil {
		return nil, false, err
	}
	if cur != nil {
		sc, err := s.write(ctx, tx, scheduleUpdate, cur, *st, next, &p.Actor)
		return sc, false, err
	}
	if err := s.room(ctx, tx, org); err != nil {
		return nil, false, err
	}
	sc, err := s.write(ctx, tx, scheduleInsert, &Schedule{OrganizationID: org, SavedSearchID: id}, *st, next, &p.Actor)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, errCreatedMeanwhile // another writer created it first: change theirs
	}
	return sc, err == nil, err
}

// room returns [ErrTooMany] when org is at its limit, under
// scheduleCreateLock so concurrent creates cannot both take the last place.
func (s *Store) room(ctx context.Context, tx pgx.Tx, org uuid.UUID) error {
	if _, err := tx.Exec(ctx, scheduleCreateLock, org); err != nil {
		return fmt.Errorf("schedule: lock the organization's creates: %w", err)
	}
	var n int
	if err := tx.QueryRow(ctx, scheduleCount, org).Scan(&n); err != nil {
		return fmt.Errorf("schedule: count the organization's schedules: %w", err)
	}
	if n >= s.most {
		return ErrTooMany
	}
	return nil
}

// lock locks the schedule (nil if none; [ErrNotFound] when required) and
// reads the [readState] under the lock, so no plan writes an occurrence in
// between ([ErrSavedSearchNotFound] unless live), then judges ifMatch.
func (s *Store) lock(ctx context.Context, tx pgx.Tx, org, id uuid.UUID, ifMatch func(int64) bool, required bool) (*Schedule, readState, error) {
	cur, err := scanSchedule(tx.Query(ctx, scheduleLock, org, id))
	if err != nil && (required || !errors.Is(err, pgx.ErrNoRows)) {
		return nil, readState{}, sqlarg.RowError(err, ErrNotFound, "schedule: lock")
	}
	var rs readState
	var live bool
	if err := tx.QueryRow(ctx, scheduleReadState, org, id, s.clock.Arg()).Scan(&rs.now, &live, &rs.lastDue); err != nil {
		return nil, rs, fmt.Errorf("schedule: read: %w", err)
	}
	if !live {
		return nil, rs, ErrSavedSearchNotFound
	}
	return cur, rs, precondition(cur, ifMatch)
}

// precondition judges ifMatch (nil: none) against cur (nil matches no version).
func precondition(cur *Schedule, ifMatch func(version int64) bool) error {
	switch {
	case ifMatch == nil:
		return nil
	case cur == nil:
		return &VersionMismatchError{}
	case !ifMatch(cur.Version):
		return &VersionMismatchError{Current: cur.Version}
	}
	return nil
}

// settleStart defaults st's start to cur's, or for a new schedule to now
// rounded up, so a new interval schedule comes due at once.
func settleStart(st *Schedule, cur *Schedule, now time.Time) {
	switch {
	case !st.StartAt.IsZero():
	case cur != nil:
		st.StartAt = cur.StartAt
	default:
		st.StartAt = now.UTC().Truncate(time.Second)
		if st.StartAt.Before(now) {
			st.StartAt = st.StartAt.Add(time.Second)
		}
	}
}

// nextDue is nil while paused, cur's next when the cadence is unchanged,
// else firstDue.
func nextDue(c cadence, st Schedule, cur *Schedule, rs readState) (*time.Time, error) {
	switch {
	case st.Paused:
		return nil, nil
	case cur != nil && !cur.Paused && cur.NextDueAt != nil && sameCadence(cur, st):
		return cur.NextDueAt, nil
	}
	at, err := firstDue(c, rs)
	if err != nil {
		return nil, err
	}
	return &at, nil
}

// firstDue is at or after the clock and after the latest occurrence.
func firstDue(c cadence, rs readState) (time.Time, error) {
	at, ok := c.atOrAfter(rs.now)
	if ok && rs.lastDue != nil && !at.After(*rs.lastDue) {
		at, ok = c.after(*rs.lastDue)
	}
	if !ok {
		return time.Time{}, &errs.Error{Kind: errs.Invalid, Message: "schedule: the schedule never comes due again",
			Fields: []errs.Field{{Name: c.field(), Message: "never comes due again (no matching date within five years, " +
				"or none by " + LastDue.Format(time.RFC3339) + ", the last due time searchd stores)"}},
			Err: ErrInvalid}
	}
	return at, nil
}

func sameCadence(cur *Schedule, st Schedule) bool {
	return eqPtr(cur.IntervalSeconds, st.IntervalSeconds) && eqPtr(cur.Cron, st.Cron) && cur.TimeZone == st.TimeZone &&
		cur.StartAt.Equal(st.StartAt)
}

func sameSettings(cur *Schedule, st Schedule) bool {
	return sameCadence(cur, st) && cur.CatchUpSeconds == st.CatchUpSeconds && cur.Paused == st.Paused &&
		cur.MaxResults == st.MaxResults && cur.Note == st.Note
}

// valueOr returns *p, or def when p is nil.
func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func eqPtr[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// write runs scheduleInsert or scheduleUpdate of cur's row with st's
// settings; a non-nil actor sets updated_by (empty: NULL), nil keeps it.
func (s *Store) write(ctx context.Context, tx pgx.Tx, query string, cur *Schedule, st Schedule, next *time.Time, actor *string) (*Schedule, error) {
	args := pgx.NamedArgs{
		"org": cur.OrganizationID, "id": cur.SavedSearchID, "interval": st.IntervalSeconds, "cron": st.Cron,
		"time_zone": st.TimeZone, "start_at": st.StartAt, "catch_up": st.CatchUpSeconds, "paused": st.Paused,
		"next_due_at": next, "now": s.clock.Arg(), "actor": nil, "set_actor": actor != nil,
		"max_results": st.MaxResults, "note": st.Note,
	}
	if actor != nil && *actor != "" {
		args["actor"] = *actor
	}
	return scanSchedule(tx.Query(ctx, query, args))
}

// scanSchedule reads the one row of a query of scheduleColumns, which name
// Schedule's fields; pgx.ErrNoRows when there is none.
func scanSchedule(rows pgx.Rows, _ error) (*Schedule, error) {
	sc, err := pgx.CollectOneRow(rows, pgx.RowToAddrOfStructByName[Schedule])
	if err != nil {
		return nil, err
	}
	sc.StartAt = sc.StartAt.UTC()
	return sc, nil
}
