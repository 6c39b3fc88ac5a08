package schedule

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/searchd/searchd/errs"
)

func mustCadence(t *testing.T, interval time.Duration, expr, zone string, start time.Time) cadence {
	t.Helper()
	var iv *int64
	if interval != 0 {
		secs := int64(interval / time.Second)
		iv = &secs
	}
	c, err := newCadence(iv, &expr, zone, start)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// walk returns the first n occurrences at or after from.
func walk(t *testing.T, c cadence, from time.Time, n int) []time.Time {
	t.Helper()
	var out []time.Time
	at, ok := c.atOrAfter(from)
	for ; ok && len(out) < n; at, ok = c.after(at) {
		out = append(out, at)
	}
	if len(out) != n {
		t.Fatalf("walk from %v: %d occurrences, want %d", from, len(out), n)
	}
	return out
}

func utc(s string) time.Time {
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return at.UTC()
}

// TestDailyCronAcrossDaylightSaving: a daily cron schedule comes due once
// every local day, at its local time, across both transitions: the night
// the clocks go back (02:30 happens twice) it runs once, at the first
// 02:30; the night they go forward (02:30 never happens) it runs at the
// instant 02:30 would have had, 03:30 local; and a 09:00 schedule stays at
// 09:00 local while its UTC time moves by the hour.
func TestDailyCronAcrossDaylightSaving(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, expr, zone, from string
		want                   []string
	}{
		{
			name: "Paris 02:30, clocks back on 25 October", expr: "30 2 * * *", zone: "Europe/Paris", from: "2026-10-23T00:00:00Z",
			want: []string{"2026-10-23T00:30:00Z", "2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
		},
		{
			name: "Paris 02:30, clocks forward on 29 March", expr: "30 2 * * *", zone: "Europe/Paris", from: "2026-03-27T00:00:00Z",
			want: []string{"2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"},
		},
		{
			name: "New York 09:00, clocks back on 1 November", expr: "0 9 * * *", zone: "America/New_York", from: "2026-10-31T00:00:00Z",
			want: []string{"2026-10-31T13:00:00Z", "2026-11-01T14:00:00Z", "2026-11-02T14:00:00Z"},
		},
		{
			name: "New York 02:30, clocks forward on 8 March", expr: "30 2 * * *", zone: "America/New_York", from: "2026-03-07T00:00:00Z",
			want: []string{"2026-03-07T07:30:00Z", "2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"},
		},
		{
			name: "New York 01:30, clocks back on 1 November", expr: "30 1 * * *", zone: "America/New_York", from: "2026-10-31T00:00:00Z",
			want: []string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
		},
		{
			name: "the same cron in UTC", expr: "30 2 * * *", zone: "UTC", from: "2026-10-24T00:00:00Z",
			want: []string{"2026-10-24T02:30:00Z", "2026-10-25T02:30:00Z", "2026-10-26T02:30:00Z"},
		},
		{
			name: "@daily in Tokyo", expr: "@daily", zone: "Asia/Tokyo", from: "2026-10-24T00:00:00Z",
			want: []string{"2026-10-24T15:00:00Z", "2026-10-25T15:00:00Z"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := mustCadence(t, 0, tc.expr, tc.zone, time.Time{})
			got := walk(t, c, utc(tc.from), len(tc.want))
			for i, w := range tc.want {
				if !got[i].Equal(utc(w)) {
					t.Errorf("%s in %s from %s: occurrence %d = %s, want %s (all: %v)", tc.expr, tc.zone, tc.from, i,
						got[i].Format(time.RFC3339), w, got)
				}
			}
		})
	}
}

// TestHourlyCronAcrossTheSkippedHour: every quarter of an hour on the
// night the clocks go forward comes due every quarter of an hour of real
// time, each once, in order: the skipped local times take the instants
// they would have had, which the next real quarters share.
func TestHourlyCronAcrossTheSkippedHour(t *testing.T) {
	t.Parallel()
	c := mustCadence(t, 0, "*/15 * * * *", "Europe/Paris", time.Time{})
	got := walk(t, c, utc("2026-03-29T00:30:00Z"), 8)
	for i := range got {
		if want := utc("2026-03-29T00:30:00Z").Add(time.Duration(i) * 15 * time.Minute); !got[i].Equal(want) {
			t.Fatalf("occurrence %d = %s, want %s (all %v)", i, got[i].Format(time.RFC3339), want.Format(time.RFC3339), got)
		}
	}
}

// TestIntervalIsAbsoluteTime: an interval schedule comes due at start +
// k·interval, whatever the zone, from the first at or after the time asked.
func TestIntervalIsAbsoluteTime(t *testing.T) {
	t.Parallel()
	start := utc("2026-10-24T07:00:00Z")
	c := mustCadence(t, 24*time.Hour, "", "Europe/Paris", start)
	got := walk(t, c, utc("2026-10-20T00:00:00Z"), 3)
	for i, w := range []string{"2026-10-24T07:00:00Z", "2026-10-25T07:00:00Z", "2026-10-26T07:00:00Z"} {
		if !got[i].Equal(utc(w)) {
			t.Errorf("occurrence %d = %s, want %s", i, got[i].Format(time.RFC3339), w)
		}
	}
	if at, _ := c.atOrAfter(utc("2026-10-25T07:00:01Z")); !at.Equal(utc("2026-10-26T07:00:00Z")) {
		t.Errorf("atOrAfter(a second past one) = %s, want the next", at)
	}
	if at, _ := c.atOrAfter(utc("2026-10-25T07:00:00Z")); !at.Equal(utc("2026-10-25T07:00:00Z")) {
		t.Errorf("atOrAfter(one) = %s, want it", at)
	}
}

// TestCronStartsAtItsStart: a cron schedule comes due no earlier than its
// start time.
func TestCronStartsAtItsStart(t *testing.T) {
	t.Parallel()
	c := mustCadence(t, 0, "0 9 * * *", "UTC", utc("2026-05-10T09:00:00Z"))
	if at, _ := c.atOrAfter(utc("2026-05-01T00:00:00Z")); !at.Equal(utc("2026-05-10T09:00:00Z")) {
		t.Errorf("first = %s, want the start", at)
	}
}

// TestCronThatNeverComesDue: 30 February has no occurrence.
func TestCronThatNeverComesDue(t *testing.T) {
	t.Parallel()
	c := mustCadence(t, 0, "0 9 30 2 *", "UTC", time.Time{})
	if at, ok := c.atOrAfter(utc("2026-01-01T00:00:00Z")); ok {
		t.Errorf("30 February came due at %s", at)
	}
}

func TestSetParamsValidate(t *testing.T) {
	t.Parallel()
	iv := func(n int64) *int64 { return &n }
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name  string
		p     SetParams
		field string
	}{
		{"neither cadence", SetParams{}, "interval_seconds"},
		{"both cadences", SetParams{IntervalSeconds: iv(3600), Cron: str("0 9 * * *")}, "cron"},
		{"interval under a minute", SetParams{IntervalSeconds: iv(59)}, "interval_seconds"},
		{"interval over 366 days", SetParams{IntervalSeconds: iv(31622401)}, "interval_seconds"},
		{"cron of six fields", SetParams{Cron: str("0 0 9 * * *")}, "cron"},
		{"cron @every", SetParams{Cron: str("@every 1h")}, "cron"},
		{"cron with a zone", SetParams{Cron: str("TZ=UTC 0 9 * * *")}, "cron"},
		{"cron too long", SetParams{Cron: str("0 9 * * * " + string(make([]byte, 100)))}, "cron"},
		{"unknown zone", SetParams{IntervalSeconds: iv(3600), TimeZone: str("Mars/Olympus")}, "time_zone"},
		{"Local zone", SetParams{IntervalSeconds: iv(3600), TimeZone: str("Local")}, "time_zone"},
		{"catch-up under a minute", SetParams{IntervalSeconds: iv(3600), CatchUpSeconds: iv(59)}, "catch_up_seconds"},
		{"catch-up over a week", SetParams{IntervalSeconds: iv(3600), CatchUpSeconds: iv(604801)}, "catch_up_seconds"},
	} {
		err := tc.p.Validate()
		if err == nil {
			t.Errorf("%s: Validate() = nil, want a refusal of %s", tc.name, tc.field)
			continue
		}
		if !errorsIs(err, ErrInvalid) || !namesField(err, tc.field) {
			t.Errorf("%s: Validate() = %v, want ErrInvalid naming %s", tc.name, err, tc.field)
		}
	}
	for _, p := range []SetParams{
		{IntervalSeconds: iv(60)},
		{Cron: str("*/5 9-17 * * 1-5"), TimeZone: str("Europe/Paris"), CatchUpSeconds: iv(60)},
		{Cron: str("@weekly"), CatchUpSeconds: iv(604800)},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", p, err)
		}
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// namesField reports whether err names field among its refused fields.
func namesField(err error, field string) bool {
	for _, f := range errs.FieldsOf(err) {
		if f.Name == field {
			return true
		}
	}
	return false
}

// TestNoOccurrenceAfterTheLastDueTime: a cadence ends at LastDue, so a
// schedule whose next occurrence would be later has none, and a running
// one ends there (its last occurrence's deadline is a time JSON writes).
func TestNoOccurrenceAfterTheLastDueTime(t *testing.T) {
	t.Parallel()
	yearly, iv := "@yearly", int64(MaxInterval/time.Second)
	for _, tc := range []struct {
		name     string
		interval *int64
		cron     *string
	}{{"interval", &iv, nil}, {"cron", nil, &yearly}} {
		c, err := newCadence(tc.interval, tc.cron, "UTC", LastDue.AddDate(-1, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if at, ok := c.after(LastDue); ok {
			t.Errorf("%s: after the last due time = %s, want none", tc.name, at)
		}
		first, ok := c.atOrAfter(LastDue.AddDate(-1, 0, 0))
		row := planRow{Now: LastDue, Interval: tc.interval, Zone: "UTC", Start: LastDue.AddDate(-1, 0, 0),
			CatchUp: int64(MaxCatchUp / time.Second), Next: first}
		if tc.cron != nil {
			row.Expr = *tc.cron
		}
		dues, next := row.dues(10)
		if !ok || len(dues) == 0 || next != nil {
			t.Errorf("%s: planned %v then %v, want its occurrences to the last due time and no next", tc.name, dues, next)
		}
		for _, d := range dues {
			if b, err := json.Marshal(d.Add(MaxCatchUp)); d.After(LastDue) || err != nil {
				t.Errorf("%s: occurrence %s, deadline %s, %v", tc.name, d, b, err)
			}
		}
	}
	if _, err := json.Marshal(LastTime); err != nil {
		t.Errorf("LastTime %s: %v", LastTime, err)
	}
}
