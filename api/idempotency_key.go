package api

import (
	"net/http"
	"strings"
)

// HeaderIdempotencyKey is the request header that names a start.
const HeaderIdempotencyKey = "Idempotency-Key"

// MaxIdempotencyKeyLen is the longest key, in ASCII characters.
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

// idempotencyKey reads h's Idempotency-Key, returning errKeyMissing or
// errKeyInvalid (repeated, or refused by [ParseIdempotencyKey]).
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

// ParseIdempotencyKey returns the key an Idempotency-Key value names, or
// errKeyInvalid. The value is bare (no comma, which would make it a list
// of joined headers) or a structured-field string (RFC 8941 §3.3.3, as the
// IETF draft specifies). The key is 1 to [MaxIdempotencyKeyLen] printable
// ASCII characters without leading or trailing space, so both forms name
// the same keys.
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

// unquoteSFString decodes s as exactly one structured-field string.
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
