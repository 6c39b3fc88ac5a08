package schedule

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // every IANA zone, whatever the host has installed

	"github.com/robfig/cron/v3"
)

// Limits of a schedule, checked before any SQL (and held by the table's
// checks).
const (
	// MinInterval and MaxInterval bound an interval schedule. A minute is
	// also a cron expression's finest step, so no schedule comes due more
	// than once a minute.
	MinInterval = time.Minute
	MaxInterval = 366 * 24 * time.Hour
	// DefaultCatchUp is the catch-up window of a schedule that names none:
	// an occurrence due more than this long ago is missed, never started,
	// because a very late start is worse than none.
	DefaultCatchUp = 24 * time.Hour
	// MinCatchUp and MaxCatchUp bound the catch-up window.
	MinCatchUp = time.Minute
	MaxCatchUp = 7 * 24 * time.Hour
	// MaxCronLen and MaxTimeZoneLen bound the texts, in bytes.
	MaxCronLen     = 100
	MaxTimeZoneLen = 64
	// DefaultTimeZone is the zone of a schedule that names none.
	DefaultTimeZone = "UTC"
)

// LastTime is the last instant searchd writes or reads in JSON
// (RFC 3339 has four digits for the year), and LastDue the last an
// occurrence may come due: its catch-up deadline, at most MaxCatchUp
// later, is still at or before LastTime. A cadence has no occurrence after
// LastDue, so a schedule whose next one would be later has none (its set
// is refused; a running one ends): every time a schedule stores can be
// answered.
var (
	LastTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	LastDue  = LastTime.Add(-MaxCatchUp)
)

// cronParser reads the five fields of standard cron (minute, hour, day of
// month, month, day of week) and the descriptors (@daily, @hourly...).
// robfig/cron is the parser most Go schedulers use; searchd uses its
// parser and its field matching, and decides the time zone itself (see
// cadence.after).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cadence is a schedule's rule, parsed: every interval from start, or the
// times a cron expression names on the wall clock of loc, from start.
type cadence struct {
	interval time.Duration // zero for a cron schedule
	spec     cron.Schedule // nil for an interval schedule
	loc      *time.Location
	start    time.Time // whole seconds
}

// parseCron parses expr, refusing what a schedule states elsewhere: a
// time zone prefix (the schedule's time_zone) and @every (its interval).
func parseCron(expr string) (cron.Schedule, error) {
	switch e := strings.TrimSpace(expr); {
	case e == "":
		return nil, fmt.Errorf("is empty")
	case len(expr) > MaxCronLen:
		return nil, fmt.Errorf("must be at most %d bytes", MaxCronLen)
	case strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ="):
		return nil, fmt.Errorf("must not name a time zone: set time_zone")
	case strings.HasPrefix(e, "@every"):
		return nil, fmt.Errorf("must not be @every: set interval_seconds")
	}
	spec, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("is not a cron expression of five fields or a descriptor such as @daily: %v", err)
	}
	return spec, nil
}

// loadZone returns the location an IANA time zone name names.
func loadZone(name string) (*time.Location, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("is empty")
	case len(name) > MaxTimeZoneLen:
		return nil, fmt.Errorf("must be at most %d bytes", MaxTimeZoneLen)
	case name == "Local":
		// The server's zone is no zone a client can know.
		return nil, fmt.Errorf("must be an IANA time zone name such as Europe/Paris or UTC")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("must be an IANA time zone name such as Europe/Paris or UTC")
	}
	return loc, nil
}

// newCadence returns the cadence of a stored or validated schedule: every
// interval seconds, or when cron is set (and not empty) its times.
func newCadence(interval *int64, cron *string, zone string, start time.Time) (cadence, error) {
	loc, err := loadZone(zone)
	if err != nil {
		return cadence{}, fmt.Errorf("time_zone %q %w", zone, err)
	}
	c := cadence{loc: loc, start: start.Truncate(time.Second)}
	if interval != nil {
		c.interval = time.Duration(*interval) * time.Second
	}
	if cron != nil && *cron != "" {
		if c.spec, err = parseCron(*cron); err != nil {
			return cadence{}, fmt.Errorf("cron %q %w", *cron, err)
		}
	}
	return c, nil
}

// atOrAfter returns the first occurrence at or after t, and false when
// the schedule has none.
func (c cadence) atOrAfter(t time.Time) (time.Time, bool) {
	return c.after(t.Add(-time.Nanosecond))
}

// after returns the first occurrence strictly after t, and false when the
// schedule has none (a cron expression that matches no date within five
// years, such as 30 February; or none by LastDue).
//
// An interval schedule's occurrences are start + k·interval, k ≥ 0:
// absolute time, so a 24-hour interval drifts by an hour on the local
// clock when daylight saving time begins or ends.
//
// A cron schedule is read on the wall clock of its time zone, where some
// local times happen twice (the hour repeated when DST ends) and some not
// at all (the hour skipped when it begins). A local time names one
// occurrence: a repeated one comes due at its first instant, so a daily
// 02:30 runs once on the night the clocks go back; a skipped one at the
// instant it would have had without the shift (02:30 becomes 03:30 that
// night), so a daily schedule runs every day. The matching is robfig/cron's,
// on wall-clock times written as UTC (which has no DST, so every wall time
// exists once there); their instants are decided here, because the
// library's own zone handling runs a repeated time twice and skips a
// skipped one.
func (c cadence) after(t time.Time) (time.Time, bool) {
	at, ok := c.next(t)
	if !ok || at.After(LastDue) {
		return time.Time{}, false
	}
	return at, true
}

// field names the setting to blame when the cadence never comes due: its
// start, when it is past LastDue or c is an interval's; else its cron
// expression.
func (c cadence) field() string {
	if c.spec == nil || c.start.After(LastDue) {
		return "start_at"
	}
	return "cron"
}

// next is after without the bound of LastDue.
func (c cadence) next(t time.Time) (time.Time, bool) {
	if c.spec == nil {
		if t.Before(c.start) {
			return c.start, true
		}
		k := t.Sub(c.start)/c.interval + 1
		return c.start.Add(k * c.interval), true
	}
	if t.Before(c.start) {
		t = c.start.Add(-time.Nanosecond)
	}
	// Instants are not monotonic in wall time across a skipped hour (02:30
	// becomes 03:30, after 03:00), so near a change of offset the walk
	// starts a few hours back on the wall clock; it keeps the earliest
	// instant after t and stops once no later wall time can map to an
	// earlier one.
	var back time.Duration
	_, before := t.Add(-24 * time.Hour).In(c.loc).Zone()
	_, later := t.Add(24 * time.Hour).In(c.loc).Zone()
	if before != later {
		back = 4 * time.Hour
	}
	w := wall(t.In(c.loc)).Add(-back)
	var best time.Time
	for range 100_000 {
		w = c.spec.Next(w)
		if w.IsZero() {
			break
		}
		at, lowest := instant(w, c.loc)
		if at.After(t) && (best.IsZero() || at.Before(best)) {
			best = at
		}
		if !best.IsZero() && lowest.After(best) {
			break
		}
	}
	return best, !best.IsZero()
}

// wall returns t's wall-clock reading as a time in UTC.
func wall(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
}

// instant returns the instant wall time w (a wall-clock reading written as
// UTC) names in loc: its first instant when the local time happens twice,
// the instant it would have had with the offset before the shift when it
// does not happen at all. lowest bounds the instant of every wall time
// after w from below, for the caller's walk. The offsets in force a day
// either side are the candidates: no zone changes its offset twice within
// two days.
func instant(w time.Time, loc *time.Location) (at, lowest time.Time) {
	base := w.Unix()
	_, early := time.Unix(base-86400, 0).In(loc).Zone()
	_, late := time.Unix(base+86400, 0).In(loc).Zone()
	lowest = time.Unix(base-int64(max(early, late)), 0)
	for _, off := range []int{max(early, late), min(early, late)} {
		cand := time.Unix(base-int64(off), 0)
		if wall(cand.In(loc)).Equal(w) {
			return cand, lowest
		}
	}
	return time.Unix(base-int64(early), 0), lowest
}
