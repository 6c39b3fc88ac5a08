package schedule

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // every IANA zone, whatever the host has installed

	"github.com/robfig/cron/v3"
)

// Limits of a schedule, checked before any SQL and by the table's checks.
const (
	// MinInterval and MaxInterval bound an interval schedule. A minute is
	// also cron's finest step, so nothing comes due more than once a minute.
	MinInterval = time.Minute
	MaxInterval = 366 * 24 * time.Hour
	// DefaultCatchUp is the catch-up window of a schedule that names none:
	// an occurrence due longer ago than this is missed, never started.
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

// LastTime is the last instant JSON can carry (RFC 3339 has four-digit
// years). LastDue is the last due time whose catch-up deadline is still at
// or before LastTime; a cadence has no occurrence after it.
var (
	LastTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	LastDue  = LastTime.Add(-MaxCatchUp)
)

// cronParser reads five-field cron and descriptors; zones are cadence.after's.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cadence is every interval from start, or a cron expression's wall-clock
// times in loc from start.
type cadence struct {
	interval time.Duration // zero for a cron schedule
	spec     cron.Schedule // nil for an interval schedule
	loc      *time.Location
	start    time.Time // whole seconds
}

// parseCron parses expr, refusing a zone prefix and @every, which the
// schedule states in its own fields.
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

func loadZone(name string) (*time.Location, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("is empty")
	case len(name) > MaxTimeZoneLen:
		return nil, fmt.Errorf("must be at most %d bytes", MaxTimeZoneLen)
	}
	// Local is the server's zone, which clients cannot know.
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return nil, fmt.Errorf("must be an IANA time zone name such as Europe/Paris or UTC")
	}
	return loc, nil
}

// newCadence returns cron's cadence when cron is non-empty, else every
// interval seconds.
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

func (c cadence) atOrAfter(t time.Time) (time.Time, bool) {
	return c.after(t.Add(-time.Nanosecond))
}

// after returns the first occurrence after t; false if none (no match
// within five years, or none by LastDue). Intervals are absolute time. Cron
// times are wall-clock in the zone: a repeated local time runs once, at its
// first instant; a skipped one at its pre-shift instant (02:30 becomes 03:30).
// robfig/cron would run a repeated time twice and skip a skipped one, so
// instants are decided here.
func (c cadence) after(t time.Time) (time.Time, bool) {
	at, ok := c.next(t)
	if !ok || at.After(LastDue) {
		return time.Time{}, false
	}
	return at, true
}

// field names the setting to blame when the cadence never comes due.
func (c cadence) field() string {
	if c.spec == nil || c.start.After(LastDue) {
		return "start_at"
	}
	return "cron"
}

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
	// Across a skipped hour instants are not monotonic in wall time: start a
	// few hours back and keep the earliest instant after t.
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

func wall(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
}

// instant returns the instant the wall time w (written as UTC) names in loc:
// the first of a repeated time, or the pre-shift instant of a skipped one;
// lowest bounds the instants of later wall times. No zone changes offset
// twice within two days, so the offsets a day either side are the candidates.
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
