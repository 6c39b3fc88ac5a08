package api

import (
	"net/http"
	"strings"
)

// HeaderIdempotencyKey is the request header that names a start.
const HeaderIdempotencyKey = "Idempotency-Key"

// MaxIdempotencyKeyLen is the longest key, in characters (ASCII, so bytes).
// It matches the column the idempotency plane stores keys in.
const MaxIdempotencyKeyLen = 255

var (
	// errKeyMissing answers a request without an Idempotency-Key header.
	errKeyMissing = &apiError{status: http.StatusBadRequest, code: CodeMissingIdempotencyKey,
		detail: "the Idempotency-Key header is required"}
	// errKeyInvalid answers an Idempotency-Key header the API refuses.
	errKeyInvalid = &apiError{status: http.StatusBadRequest, code: CodeInvalidIdempotencyKey,
		detail: "the Idempotency-Key header must be one key of 1 to 255 printable ASCII characters, " +
			"optionally as a quoted string; a space may not start or end it, and a comma only appears in the quoted form"}
)

// idempotencyKey reads the Idempotency-Key header of h. It returns
// errKeyMissing when the header is absent and errKeyInvalid when it is
// present more than once or its one value is refused by [ParseIdempotencyKey].
func idempotencyKey(h http.Header) (string, error) {
	values := h.Values(HeaderIdempotencyKey)
	switch len(values) {
	case 0:
		return "", errKeyMissing
	case 1:
		return ParseIdempotencyKey(values[0])
	}
	// Two headers, or one list: which key the client meant is a guess.
	return "", errKeyInvalid
}

// ParseIdempotencyKey returns the key an Idempotency-Key header value names,
// or errKeyInvalid.
//
// A value is accepted in two forms:
//
//   - bare: the value itself is the key, which holds no comma: a comma
//     makes the value a list, which is what the draft's structured field
//     (an Item, never a List) refuses, and what an intermediary may make
//     of two header lines by joining them (RFC 9110 §5.3), so which key
//     the client meant is a guess;
//   - quoted: a structured-field string (RFC 8941 §3.3.3), the form the IETF
//     Idempotency-Key draft specifies, such as "8e03978e-40d5". The quotes are
//     removed and the escapes \" and \\ are undone. A value that starts with
//     a double quote is always read this way, so it must be a well-formed
//     string with no parameters after it.
//
// The key itself, in either form, is 1 to [MaxIdempotencyKeyLen] printable
// ASCII characters (0x20 to 0x7E). A space may appear inside the key but not
// at its start or end: HTTP strips the white space around a field value, so a
// bare key could never carry it, and the two forms must name the same keys.
// Surrounding white space of the header value itself is ignored.
func ParseIdempotencyKey(value string) (string, error) {
	v := strings.Trim(value, " \t")
	key := v
	if strings.HasPrefix(v, `"`) {
		var ok bool
		if key, ok = unquoteSFString(v); !ok {
			return "", errKeyInvalid
		}
	} else if strings.Contains(v, ",") {
		return "", errKeyInvalid
	}
	if key == "" || len(key) > MaxIdempotencyKeyLen || key[0] == ' ' || key[len(key)-1] == ' ' ||
		strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return "", errKeyInvalid
	}
	return key, nil
}

// unquoteSFString decodes s, which starts with a double quote, as exactly one
// structured-field string and nothing after it. It reports false for an
// unterminated string, an escape other than \" and \\, a character outside
// 0x20..0x7E, or anything after the closing quote.
func unquoteSFString(s string) (string, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", false
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), i == len(s)-1
		case c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", false // no closing quote
}
