package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Limits of the filters, enforced before any SQL.
const (
	maxFilterLen = 255 // actor, key, scope, provider: what the columns hold
	maxNameLen   = 200 // a saved search's name
)

// filters reads a request's query parameters and collects what is wrong
// with them, one message per parameter.
type filters struct {
	q        url.Values
	problems []string
}

func newFilters(r *http.Request) *filters { return &filters{q: r.URL.Query()} }

func (f *filters) bad(name, format string, args ...any) {
	f.problems = append(f.problems, name+": "+fmt.Sprintf(format, args...))
}

// text returns parameter name trimmed, refusing over max characters,
// invalid UTF-8 and control characters.
func (f *filters) text(name string, max int) string {
	v := strings.TrimSpace(f.q.Get(name))
	switch {
	case !utf8.ValidString(v) || utf8.RuneCountInString(v) > max:
		f.bad(name, "at most %d characters of UTF-8", max)
		return ""
	case strings.ContainsFunc(v, unicode.IsControl):
		f.bad(name, "must not hold control characters")
		return ""
	}
	return v
}

// parsed returns parameter name, trimmed, as parse reads it: T's zero
// value when empty, and when parse refuses it, with the problem "v is
// not <what>" (what formatted with args).
func parsed[T any](f *filters, name string, parse func(string) (T, bool), what string, args ...any) (zero T) {
	v := strings.TrimSpace(f.q.Get(name))
	if v == "" {
		return zero
	}
	if t, ok := parse(v); ok {
		return t
	}
	f.bad(name, "%q is not "+what, append([]any{clip(v)}, args...)...)
	return zero
}

// id returns parameter name as a UUID, uuid.Nil when empty.
func (f *filters) id(name string) uuid.UUID {
	return parsed(f, name, func(v string) (uuid.UUID, bool) {
		id, err := uuid.Parse(v)
		return id, err == nil
	}, "a UUID")
}

// timeLayouts are the accepted time filter layouts, UTC without a zone.
// Filters are text fields, since a browser date picker would show local
// time while the console reads UTC.
var timeLayouts = []string{"2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02T15:04:05",
	"2006-01-02", time.RFC3339}

// time returns parameter name as an instant, the zero time when empty.
func (f *filters) time(name string) time.Time {
	return parsed(f, name, func(v string) (time.Time, bool) {
		for _, l := range timeLayouts {
			if t, err := time.ParseInLocation(l, v, time.UTC); err == nil {
				return t, true
			}
		}
		return time.Time{}, false
	}, "a time: write it like 2026-12-01 09:30 (UTC) or 2026-12-01")
}

// oneOf returns parameter name if it is empty or one of allowed.
func (f *filters) oneOf(name string, allowed ...string) string {
	return parsed(f, name, func(v string) (string, bool) { return v, slices.Contains(allowed, v) },
		"one of %s", strings.Join(allowed, ", "))
}

// cursor returns parameter name, a page cursor, bounded in length; the
// store says whether it wrote it.
func (f *filters) cursor(name string) string {
	v := f.q.Get(name)
	if len(v) > 64 {
		f.bad(name, "is not a cursor of this console")
		return ""
	}
	return v
}

// filterError is what is wrong with a request's filters: a 400.
type filterError string

func (e filterError) Error() string { return string(e) }

// err returns the problems as one filterError, nil when there are none.
func (f *filters) err() error {
	if len(f.problems) == 0 {
		return nil
	}
	return filterError(strings.Join(f.problems, "; "))
}

// clip shortens a value quoted back in a message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// pathID is the {id} of the path, which [Console.session] found a UUID.
func pathID(r *http.Request) uuid.UUID {
	id, _ := uuid.Parse(r.PathValue("id"))
	return id
}

func orgOf(r *http.Request) uuid.UUID { return sessionOf(r.Context()).OrganizationID }

// idText writes a filter's id, "" for none.
func idText(id uuid.UUID) string {
	if id == uuid.Nil {
		return ""
	}
	return id.String()
}

// localInput writes t for a time filter's field, in UTC as timeLayouts'
// first layout, "" for the zero time.
func localInput(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayouts[0])
}

// maxPosition bounds a position in a list of baseline items: far more
// items than any baseline holds.
const maxPosition = 1 << 31

// position returns parameter name as a list position from 0 (also when
// empty) to maxPosition.
func (f *filters) position(name string) int64 {
	return parsed(f, name, func(v string) (int64, bool) {
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil && n >= 0 && n <= maxPosition
	}, "a position in the list: a whole number from 0 to %d", maxPosition)
}
