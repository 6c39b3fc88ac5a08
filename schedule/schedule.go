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

// The errors of this package carry the kinds of package errs, as its
// package doc says of every domain package.
var (
	// ErrNotFound reports a saved search with no schedule.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "schedule: the saved search has no schedule",
		Detail: "this saved search has no schedule"}
	// ErrSavedSearchNotFound reports a saved search the organization does
	// not have, or, for a change that would start it, has archived.
	ErrSavedSearchNotFound = &errs.Error{Kind: errs.NotFound, Message: "schedule: saved search not found",
		Detail: "no such saved search in your organization (a schedule is set on a live one)"}
	// ErrInvalid is wrapped by every refusal of a schedule's fields; the
	// errs.Error names each refused field.
	ErrInvalid = errs.New(errs.Invalid, "schedule: invalid schedule")
	// ErrInvalidCursor reports a list cursor this package did not write.
	ErrInvalidCursor = keyset.InvalidCursor("schedule")
	// ErrTooMany reports a new schedule beyond the organization's
	// limit ([Store.Limit]): a 409 schedule_limit.
	ErrTooMany = &errs.Error{Kind: errs.Conflict, Code: "schedule_limit", Message: "schedule: the organization has as many schedules as it may",
		Detail: "your organization has as many schedules as it may (SEARCHD_SCHEDULE_MAX_PER_ORG); remove one first"}
	// ErrVersionMismatch is wrapped by every [*VersionMismatchError].
	ErrVersionMismatch = &errs.Error{Kind: errs.PreconditionFailed, Message: "schedule: version precondition failed",
		Detail: "the schedule changed since the version If-Match names, or there is none; " +
			"read it again (its ETag) and reapply the change"}
)

// VersionMismatchError reports a change refused by its precondition on
// the schedule's version (an HTTP If-Match): Current is the version it was
// judged against, 0 when the saved search has no schedule.
type VersionMismatchError struct{ Current int64 }

func (e *VersionMismatchError) Error() string {
	if e.Current == 0 {
		return "schedule: version precondition failed; the saved search has no schedule"
	}
	return fmt.Sprintf("schedule: version precondition failed; the current version is %d", e.Current)
}

// Unwrap returns [ErrVersionMismatch]: its kind, its detail.
func (e *VersionMismatchError) Unwrap() error { return ErrVersionMismatch }

// CurrentVersion returns Current.
func (e *VersionMismatchError) CurrentVersion() int64 { return e.Current }

// Schedule is a saved search's schedule.
type Schedule struct {
	SavedSearchID  uuid.UUID `json:"saved_search_id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	// IntervalSeconds and Cron are the cadence: exactly one is set.
	IntervalSeconds *int64  `json:"interval_seconds"`
	Cron            *string `json:"cron"`
	// TimeZone is the IANA zone a cron expression is read in.
	TimeZone string `json:"time_zone"`
	// StartAt is the first instant the schedule may come due (whole
	// seconds); an interval schedule comes due at StartAt + k·interval.
	StartAt        time.Time `json:"start_at"`
	CatchUpSeconds int64     `json:"catch_up_seconds"`
	Paused         bool      `json:"paused"`
	// MaxResults and Note are the start options of the Runs it starts,
	// as a client's start gives them (admission.StartOptions): each
	// occurrence starts with those its schedule had when it came due.
	MaxResults int    `json:"max_results"`
	Note       string `json:"note"`
	// NextDueAt is the next time the schedule comes due; nil while it is
	// paused, or when it will not come due again (its saved search was
	// archived, or its cron expression names no further date).
	NextDueAt *time.Time `json:"next_due_at"`
	// Version starts at 1 and grows by one on every change.
	Version int64 `json:"version"`
	// UpdatedBy is the actor who last set the schedule; its starts record
	// it as theirs. Nil when unknown.
	UpdatedBy *string   `json:"updated_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// cadence returns s's rule.
func (s *Schedule) cadence() (cadence, error) {
	return newCadence(s.IntervalSeconds, s.Cron, s.TimeZone, s.StartAt)
}

// SetParams are the inputs of [Store.Set]. The json names are those of
// the HTTP request body. A set replaces the whole schedule: an omitted
// field takes its default, but for StartAt, which keeps the stored value.
type SetParams struct {
	// IntervalSeconds is 60 to 31622400 (a minute to 366 days); exactly
	// one of it and Cron is set.
	IntervalSeconds *int64 `json:"interval_seconds"`
	// Cron is a cron expression of five fields (minute, hour, day of
	// month, month, day of week) or a descriptor (@daily, @hourly, ...),
	// at most 100 bytes, with no time zone prefix and no @every.
	Cron *string `json:"cron"`
	// TimeZone is an IANA time zone name, at most 64 bytes; default UTC.
	TimeZone *string `json:"time_zone"`
	// StartAt is the first instant the schedule may come due, cut to the
	// second; default the stored one, or, for a new schedule, the time it
	// is set (rounded up to the second: an interval schedule set without
	// one comes due at once). A start in the past is never back-filled: the first
	// occurrence is the first due at or after the set.
	StartAt *time.Time `json:"start_at"`
	// CatchUpSeconds is the catch-up window, 60 to 604800 (a minute to a
	// week); default 86400 (24 h).
	CatchUpSeconds *int64 `json:"catch_up_seconds"`
	// Paused, when true, makes the schedule produce no occurrences;
	// default false.
	Paused *bool `json:"paused"`
	// MaxResults and Note are the start options of its Runs, with a
	// start's limits and defaults: 1 to admission.MaxMaxResults (default
	// admission.DefaultMaxResults), at most admission.MaxNoteLen
	// characters (default empty).
	MaxResults *int    `json:"max_results"`
	Note       *string `json:"note"`

	// Actor is recorded as the schedule's updated_by and on the starts
	// it makes; empty records NULL.
	Actor string `json:"-"`
	// IfMatch, when set, is a precondition on the schedule's version,
	// judged under the row lock the change takes; a false answer, or any
	// precondition when there is no schedule, changes nothing and returns
	// a [*VersionMismatchError].
	IfMatch func(version int64) bool `json:"-"`
}

// settings are a SetParams with its defaults applied, as stored.
type settings struct {
	interval       *int64
	cron           *string
	timeZone       string
	startAt        *time.Time
	catchUpSeconds int64
	paused         bool
	options        admission.StartOptions
}

// Validate returns an error of kind errs.Invalid wrapping [ErrInvalid]
// that names every refused field, or nil. It runs no SQL; [Store.Set]
// also refuses, after reading the clock, a cron expression that never
// comes due again.
func (p SetParams) Validate() error {
	_, _, err := p.settings()
	return err
}

// settings applies p's defaults and returns them with the cadence they
// name (whose start is zero when p sets none).
func (p SetParams) settings() (settings, cadence, error) {
	var fields []errs.Field
	bad := func(name, msg string) { fields = append(fields, errs.Field{Name: name, Message: msg}) }
	st := p.withDefaults(bad)
	p.checkCadence(bad)
	if _, err := loadZone(st.timeZone); err != nil {
		bad("time_zone", err.Error())
	}
	if p.MaxResults != nil && (*p.MaxResults < 1 || *p.MaxResults > admission.MaxMaxResults) {
		bad("max_results", fmt.Sprintf("must be from 1 to %d", admission.MaxMaxResults))
	}
	if p.Note != nil && utf8.RuneCountInString(*p.Note) > admission.MaxNoteLen {
		bad("note", fmt.Sprintf("must be at most %d characters", admission.MaxNoteLen))
	}
	if st.catchUpSeconds < int64(MinCatchUp/time.Second) || st.catchUpSeconds > int64(MaxCatchUp/time.Second) {
		bad("catch_up_seconds", fmt.Sprintf("must be from %d to %d (a minute to a week)",
			int64(MinCatchUp/time.Second), int64(MaxCatchUp/time.Second)))
	}
	if len(fields) > 0 {
		return st, cadence{}, &errs.Error{Kind: errs.Invalid, Message: "schedule: invalid schedule: " + fields[0].Name +
			" " + fields[0].Message, Fields: fields, Err: ErrInvalid}
	}
	var start time.Time
	if st.startAt != nil {
		start = *st.startAt
	}
	c, err := newCadence(st.interval, st.cron, st.timeZone, start)
	if err != nil {
		return st, cadence{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return st, c, nil
}

// withDefaults returns p's settings with the defaults of what p leaves
// out, telling bad of a start_at out of range.
func (p SetParams) withDefaults(bad func(name, msg string)) settings {
	st := settings{interval: p.IntervalSeconds, cron: p.Cron, timeZone: DefaultTimeZone,
		catchUpSeconds: int64(DefaultCatchUp / time.Second)}
	if p.TimeZone != nil {
		st.timeZone = *p.TimeZone
	}
	if p.CatchUpSeconds != nil {
		st.catchUpSeconds = *p.CatchUpSeconds
	}
	if p.Paused != nil {
		st.paused = *p.Paused
	}
	if p.MaxResults != nil {
		st.options.MaxResults = *p.MaxResults
	}
	if p.Note != nil {
		st.options.Note = *p.Note
	}
	st.options = st.options.Normalize()
	if p.StartAt != nil {
		at := p.StartAt.UTC().Truncate(time.Second)
		if at.Year() < 1970 || at.Year() > 9999 {
			bad("start_at", "must be a time from 1970 to 9999")
		}
		st.startAt = &at
	}
	return st
}

// checkCadence tells bad when p sets no cadence, both an interval and a
// cron expression, or one out of range.
func (p SetParams) checkCadence(bad func(name, msg string)) {
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
	default:
		if _, err := parseCron(*p.Cron); err != nil {
			bad("cron", err.Error())
		}
	}
}

// Store reads and writes schedules and reads their occurrences. It is
// safe for concurrent use.
type Store struct {
	db    *pgxpool.Pool
	clock *dbclock.Clock
	// most is the most schedules an organization may have.
	most    int
	cursors keyset.Key
}

// DefaultMaxPerOrganization is the most schedules an organization may
// have, unless [Store.Limit] says otherwise: each comes due at most once a
// minute, and the drain serves organizations in turn, so one
// organization's schedules cost the others little; the bound keeps one
// from filling the drain's every tick.
const DefaultMaxPerOrganization = 1000

// NewStore returns a store on db, at the database clock clock (nil is the
// database's own), allowing an organization [DefaultMaxPerOrganization]
// schedules.
func NewStore(db *pgxpool.Pool, clock *dbclock.Clock) *Store {
	return &Store{db: db, clock: clock, most: DefaultMaxPerOrganization}
}

// Limit returns a store like s allowing an organization most schedules
// (at least 1).
func (s *Store) Limit(most int) *Store {
	c := *s
	c.most = max(most, 1)
	return &c
}

// Cursors returns a copy of s whose lists sign and verify their cursors
// with k, the database's cursor key in production; without it they use
// the zero [keyset.Key], whose cursors no other process accepts.
func (s *Store) Cursors(k keyset.Key) *Store {
	c := *s
	c.cursors = k
	return &c
}

// Clock returns the database clock the store runs at.
func (s *Store) Clock() *dbclock.Clock { return s.clock }

// Get returns the schedule of org's saved search id, whether the saved
// search is live or archived. It returns [ErrNotFound] when there is none.
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (_ *Schedule, err error) {
	defer dberr.Annotate(&err)
	sc, err := scanSchedule(s.db.QueryRow(ctx, scheduleGet, org, id))
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "schedule: get")
	}
	return sc, nil
}

// Set sets the schedule of org's live saved search id to p, creating it
// or replacing it whole, and returns it and whether this call created it.
// Setting the values a schedule has already changes nothing (its version
// and updated_at stay): it is a set, so a repeat changes nothing further.
// A new or changed cadence, or a resume, comes due first at the first time
// at or after the set (and after every occurrence the saved search already
// has): nothing is back-filled.
//
// Errors: an error wrapping [ErrInvalid] for fields [SetParams.Validate]
// refuses, or a cron expression that never comes due again;
// [ErrSavedSearchNotFound] when org has no live saved search id; a
// [*VersionMismatchError] when p.IfMatch refuses.
func (s *Store) Set(ctx context.Context, org, id uuid.UUID, p SetParams) (_ *Schedule, created bool, err error) {
	defer dberr.Annotate(&err)
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	var sc *Schedule
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		sc, created, err = s.setIn(ctx, tx, org, id, p)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return sc, created, nil
}

// setHashDomain names the request hash of a keyed set; stored claims hold
// hashes made with it.
const setHashDomain = "searchd.schedule.set.v1"

// SetOnce is [Store.Set] at most once per idempotency key, claimed on
// plane in [idempotency.ScopeScheduleSet]: the write and the claim's
// completion are one transaction ([idempotency.Service.CreateOnce]). It
// returns the schedule, whether this call created it, and whether the
// answer is a replay: a repeat of the request returns the schedule the
// key set as it is now, with replayed true.
//
// Errors: those of [Store.Set]; [ErrNotFound] for a repeat whose schedule
// has been removed since; [idempotency.ErrKeyReused] when key was used for
// another saved search or other fields; an [*idempotency.InFlightError]
// while the first request with key is in flight.
func (s *Store) SetOnce(ctx context.Context, plane *idempotency.Service, org, id uuid.UUID, key string, p SetParams) (_ *Schedule, created, replayed bool, err error) {
	defer dberr.Annotate(&err)
	if err := p.Validate(); err != nil {
		return nil, false, false, err
	}
	// The hash covers the saved search and p's fields by their json
	// names (Actor and IfMatch have none).
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
		sc, created, err = s.setIn(ctx, tx, org, id, p)
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

// Pause pauses the schedule of org's saved search id and returns it: it
// produces no occurrences until resumed, and an open occurrence it already
// has is refused (schedule_paused) when the drain next takes it. Pausing a
// paused schedule changes nothing. ifMatch is a precondition on the
// version as [SetParams.IfMatch]. Errors: [ErrNotFound],
// [ErrSavedSearchNotFound] (no live saved search), [*VersionMismatchError].
func (s *Store) Pause(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (_ *Schedule, err error) {
	defer dberr.Annotate(&err)
	return s.change(ctx, org, id, ifMatch, func(tx pgx.Tx, cur *Schedule, _ readState) (*Schedule, error) {
		if cur.Paused {
			return cur, nil
		}
		return s.write(ctx, tx, scheduleUpdate, cur, settingsOf(cur, true), nil, nil)
	})
}

// Resume resumes a paused schedule and returns it: it comes due next at
// the first time at or after the resume, and nothing that fell due while
// it was paused is back-filled. Resuming a running schedule changes
// nothing. Errors as [Store.Pause], and an error wrapping [ErrInvalid]
// when the cron expression never comes due again.
func (s *Store) Resume(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (_ *Schedule, err error) {
	defer dberr.Annotate(&err)
	return s.change(ctx, org, id, ifMatch, func(tx pgx.Tx, cur *Schedule, rs readState) (*Schedule, error) {
		if !cur.Paused {
			return cur, nil
		}
		c, err := cur.cadence()
		if err != nil {
			return nil, err
		}
		next, err := firstDue(c, rs)
		if err != nil {
			return nil, err
		}
		return s.write(ctx, tx, scheduleUpdate, cur, settingsOf(cur, false), &next, nil)
	})
}

// Remove deletes the schedule of org's saved search id, live or archived:
// it produces no more occurrences, and an open occurrence it has is
// refused (schedule_removed) when the drain next takes it; the
// occurrences stay, with their Runs. ifMatch is a precondition on the
// version as [SetParams.IfMatch]. Errors: [ErrNotFound],
// [*VersionMismatchError].
func (s *Store) Remove(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (err error) {
	defer dberr.Annotate(&err)
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		cur, err := scanSchedule(tx.QueryRow(ctx, scheduleLock, org, id))
		if err != nil {
			return sqlarg.RowError(err, ErrNotFound, "schedule: remove")
		}
		if ifMatch != nil && !ifMatch(cur.Version) {
			return &VersionMismatchError{Current: cur.Version}
		}
		if _, err := tx.Exec(ctx, scheduleDelete, org, id); err != nil {
			return fmt.Errorf("schedule: remove: %w", err)
		}
		return nil
	})
}

// readState is what a change reads before it writes: the database clock
// and the latest occurrence the saved search has, whose due time a new
// first occurrence must come after (the natural key is taken).
type readState struct {
	now     time.Time
	lastDue *time.Time
}

// change runs fn on the locked schedule of org's live saved search id, in
// a transaction, after judging ifMatch.
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

// setIn is Set's work on tx.
func (s *Store) setIn(ctx context.Context, tx pgx.Tx, org, id uuid.UUID, p SetParams) (*Schedule, bool, error) {
	st, c, err := p.settings()
	if err != nil {
		return nil, false, err
	}
	// Two attempts: the second follows a create another writer won between
	// this one's lock (nothing to lock) and its insert. The second keeps
	// the start the first settled on.
	for range 2 {
		sc, created, err := s.setOnce(ctx, tx, org, id, p, &st, &c)
		if !errors.Is(err, errCreatedMeanwhile) {
			return sc, created, err
		}
	}
	return nil, false, errors.New("schedule: set: the schedule was created and removed under this change")
}

// errCreatedMeanwhile is setOnce's insert that found the schedule another
// writer created since its lock.
var errCreatedMeanwhile = errors.New("schedule: created meanwhile")

// setOnce is one attempt of setIn: it locks the schedule, judges p's
// precondition, settles st's start and writes st unless it changes
// nothing. It returns errCreatedMeanwhile when its insert lost to
// another writer's.
func (s *Store) setOnce(ctx context.Context, tx pgx.Tx, org, id uuid.UUID, p SetParams, st *settings, c *cadence) (*Schedule, bool, error) {
	cur, rs, err := s.lock(ctx, tx, org, id, p.IfMatch, false)
	if err != nil {
		return nil, false, err
	}
	settleStart(st, cur, rs.now)
	c.start = *st.startAt
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

// room returns [ErrTooMany] when org has its most schedules already. It
// takes the organization's transaction lock first (scheduleCreateLock), so
// two creates of one organization count one after the other and never
// both take the last place.
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

// lock locks the schedule of org's saved search id (nil when there is
// none; [ErrNotFound] when required), reads the [readState] under the
// lock, so that no plan of this schedule can write an occurrence between
// the read and the change ([ErrSavedSearchNotFound] when the saved search
// is not live), and judges ifMatch.
func (s *Store) lock(ctx context.Context, tx pgx.Tx, org, id uuid.UUID, ifMatch func(int64) bool, required bool) (*Schedule, readState, error) {
	cur, err := scanSchedule(tx.QueryRow(ctx, scheduleLock, org, id))
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

// precondition judges ifMatch (nil: none) against cur, the schedule as
// locked (nil: none, which no version matches).
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

// settleStart gives st a start when it sets none: cur's, or for a new
// schedule the set's time now, rounded up to the second, so a new
// interval schedule comes due first at once (at the next tick), not an
// interval later.
func settleStart(st *settings, cur *Schedule, now time.Time) {
	switch {
	case st.startAt != nil:
	case cur != nil:
		st.startAt = &cur.StartAt
	default:
		at := now.UTC().Truncate(time.Second)
		if at.Before(now) {
			at = at.Add(time.Second)
		}
		st.startAt = &at
	}
}

// nextDue is when st's cadence c next comes due as cur becomes st: none
// while paused; cur's next occurrence when the cadence stays the same;
// else its first (firstDue).
func nextDue(c cadence, st settings, cur *Schedule, rs readState) (*time.Time, error) {
	switch {
	case st.paused:
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

// firstDue is the first time a new, changed or resumed cadence comes due:
// at or after the clock, and after the latest occurrence the saved search
// has, so the natural key of the first is free.
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

// settingsOf returns the stored settings of cur, paused as given.
func settingsOf(cur *Schedule, paused bool) settings {
	return settings{interval: cur.IntervalSeconds, cron: cur.Cron, timeZone: cur.TimeZone, startAt: &cur.StartAt,
		catchUpSeconds: cur.CatchUpSeconds, paused: paused,
		options: admission.StartOptions{MaxResults: cur.MaxResults, Note: cur.Note}}
}

// sameCadence reports whether st names the times cur names.
func sameCadence(cur *Schedule, st settings) bool {
	return eqPtr(cur.IntervalSeconds, st.interval) && eqPtr(cur.Cron, st.cron) && cur.TimeZone == st.timeZone &&
		cur.StartAt.Equal(*st.startAt)
}

// sameSettings reports whether st would change nothing of cur.
func sameSettings(cur *Schedule, st settings) bool {
	return sameCadence(cur, st) && cur.CatchUpSeconds == st.catchUpSeconds && cur.Paused == st.paused &&
		cur.MaxResults == st.options.MaxResults && cur.Note == st.options.Note
}

func eqPtr[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// write runs query (scheduleInsert or scheduleUpdate) for the schedule cur
// names with st and next, and returns the schedule written. actor, when
// set, is the new updated_by (empty: NULL); nil keeps updated_by.
func (s *Store) write(ctx context.Context, tx pgx.Tx, query string, cur *Schedule, st settings, next *time.Time, actor *string) (*Schedule, error) {
	args := pgx.NamedArgs{
		"org": cur.OrganizationID, "id": cur.SavedSearchID, "interval": st.interval, "cron": st.cron,
		"time_zone": st.timeZone, "start_at": *st.startAt, "catch_up": st.catchUpSeconds, "paused": st.paused,
		"next_due_at": next, "now": s.clock.Arg(), "actor": nil, "set_actor": actor != nil,
		"max_results": st.options.MaxResults, "note": st.options.Note,
	}
	if actor != nil && *actor != "" {
		args["actor"] = *actor
	}
	return scanSchedule(tx.QueryRow(ctx, query, args))
}

// scanSchedule scans scheduleColumns.
func scanSchedule(row pgx.Row) (*Schedule, error) {
	var sc Schedule
	err := row.Scan(&sc.OrganizationID, &sc.SavedSearchID, &sc.IntervalSeconds, &sc.Cron, &sc.TimeZone, &sc.StartAt,
		&sc.CatchUpSeconds, &sc.Paused, &sc.NextDueAt, &sc.Version, &sc.UpdatedBy, &sc.CreatedAt, &sc.UpdatedAt,
		&sc.MaxResults, &sc.Note)
	if err != nil {
		return nil, err
	}
	sc.StartAt = sc.StartAt.UTC()
	return &sc, nil
}
