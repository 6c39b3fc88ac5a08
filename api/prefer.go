package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/errs"
)

// Headers of RFC 7240 (Prefer for HTTP).
const (
	// HeaderPrefer carries the client's preferences; searchd understands
	// one, wait=N on a saved-search start.
	HeaderPrefer = "Prefer"
	// HeaderPreferenceApplied tells the client which preference the server
	// applied, and with what value: wait=M, M the seconds it was prepared
	// to wait.
	HeaderPreferenceApplied = "Preference-Applied"
)

// PreferWaitLimit is the most [Deps.MaxPreferWait] may be. It is the
// 30 s lease of a preparation: within it the holder the waiter met either
// ends or loses its lease to the waiter, and a client that wants longer
// retries, which costs one request per lease.
const PreferWaitLimit = 30 * time.Second

// preferWaitSeconds returns the seconds of the wait preference among the
// Prefer headers of h (RFC 7240 §4.3: wait = "wait" "=" delta-seconds),
// and reports whether one was sent and well formed.
//
// The reading is lenient where RFC 7240 asks it to be: preferences may
// come in several Prefer headers and comma-separated lists, in any order,
// with parameters (";...") and quoted strings that hold commas; names are
// case-insensitive; the value may be quoted. Only the first wait counts
// (§2: a preference given twice is read once). A preference that is
// malformed, a wait without a value or with one that is not a whole
// number of seconds, is ignored, never an error: a preference is a hint
// the server may disregard. A value too large for an int64 reads as
// math.MaxInt64, which the caller caps anyway.
func preferWaitSeconds(h http.Header) (int64, bool) {
	for _, line := range h.Values(HeaderPrefer) {
		for _, pref := range splitQuoted(line, ',') {
			// The parameters after ';' belong to the preference; wait
			// defines none, so they are read past.
			head, _, _ := cutQuoted(pref, ';')
			name, value, hasValue := strings.Cut(head, "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			if !hasValue {
				return 0, false
			}
			return deltaSeconds(unquote(strings.TrimSpace(value)))
		}
	}
	return 0, false
}

// deltaSeconds reads 1*DIGIT, saturating at math.MaxInt64.
func deltaSeconds(v string) (int64, bool) {
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 1<<63 - 1, true
	}
	return n, err == nil
}

// splitQuoted splits s at every sep outside a quoted string.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	for {
		part, rest, found := cutQuoted(s, sep)
		parts = append(parts, part)
		if !found {
			return parts
		}
		s = rest
	}
}

// cutQuoted is strings.Cut at the first sep outside a quoted string, where
// a backslash inside quotes escapes the next character (RFC 9110 §5.6.4).
// An unterminated quote runs to the end of s.
func cutQuoted(s string, sep byte) (before, after string, found bool) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// unquote returns the content of a quoted string, its escapes undone, and
// any other value as it is. A malformed quoted string comes back with its
// quote, which no caller accepts as a number.
func unquote(v string) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		if v[i] == '\\' {
			i++
			if i == len(v)-1 {
				return v // the escape took the closing quote
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// waitPreference reads the wait a saved-search start asked for and
// returns how long to wait and the Preference-Applied value to answer
// with ("" when the preference does not apply). A wait longer than the
// server's maximum is cut to it (RFC 7240 §4.3 lets the server wait less
// than asked; refusing the request would turn a hint into an error). When
// the server does not wait at all (its maximum is zero), the preference is
// ignored and nothing is applied.
func (s *Server) waitPreference(h http.Header) (time.Duration, string) {
	if s.d.MaxPreferWait <= 0 {
		return 0, ""
	}
	n, ok := preferWaitSeconds(h)
	if !ok {
		return 0, ""
	}
	seconds := min(n, int64(s.d.MaxPreferWait/time.Second))
	return time.Duration(seconds) * time.Second, "wait=" + strconv.FormatInt(seconds, 10)
}

// markPreferenceApplied sets Preference-Applied on the answers of a start
// whose wait preference was applied: the start answered (201 or 200), or a
// preparation was still in flight when the wait ran out (409 in_progress).
// Every other answer was decided by something else, before or without any
// wait, so it names no preference.
func markPreferenceApplied(c echo.Context, applied string, err error) {
	if applied != "" && (err == nil || errs.Is(err, errs.InProgress)) {
		c.Response().Header().Set(HeaderPreferenceApplied, applied)
	}
}
