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
	// HeaderPrefer: searchd understands wait=N on a saved-search start.
	HeaderPrefer = "Prefer"
	// HeaderPreferenceApplied answers wait=M, the seconds actually allowed.
	HeaderPreferenceApplied = "Preference-Applied"
)

// PreferWaitLimit caps [Deps.MaxPreferWait] at one claim lease: within
// it the holder either finishes or loses its lease to the waiter.
const PreferWaitLimit = 30 * time.Second

// preferWaitSeconds returns the first wait=N among h's Prefer headers
// (RFC 7240 §4.3) and whether one was well formed. Parsing is lenient as
// the RFC asks; malformed preferences are ignored, never errors, and huge
// values saturate at math.MaxInt64.
func preferWaitSeconds(h http.Header) (int64, bool) {
	for _, line := range h.Values(HeaderPrefer) {
		for _, pref := range splitQuoted(line, ',') {
			// wait defines no parameters; skip any after ';'.
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

// cutQuoted is strings.Cut at the first sep outside a quoted string
// (RFC 9110 §5.6.4); an unterminated quote runs to the end.
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

// unquote undoes a quoted string; other and malformed values come back
// as they are.
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

// waitPreference returns how long a start should wait, capped at
// MaxPreferWait, and the Preference-Applied value ("" when not applied,
// including when MaxPreferWait is zero).
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

// markPreferenceApplied sets Preference-Applied on a start's 201, 200 or
// 409 in_progress, the answers the wait shaped.
func markPreferenceApplied(c echo.Context, applied string, err error) {
	if applied != "" && (err == nil || errs.Is(err, errs.InProgress)) {
		c.Response().Header().Set(HeaderPreferenceApplied, applied)
	}
}
