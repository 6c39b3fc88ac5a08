// Package jsonenc appends JSON values to a byte slice exactly as
// encoding/json writes them, without reflection, for the answers searchd
// writes on its hottest paths (a start and its replays). What it cannot
// write faster it hands to encoding/json, so its output is encoding/json's
// byte for byte, errors included; the tests hold it to that.
package jsonenc

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// String appends s as a JSON string. A string of printable ASCII with
// nothing to escape is copied; any other goes through encoding/json (which
// escapes <, > and & for HTML, and writes invalid UTF-8 as U+FFFD).
func String(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s) // a string always marshals
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// UUID appends u as a JSON string in its canonical form.
func UUID(b []byte, u uuid.UUID) []byte {
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	b = append(b, '"')
	b = append(b, s[:]...)
	return append(b, '"')
}

// NullUUID appends *u, or null when u is nil.
func NullUUID(b []byte, u *uuid.UUID) []byte {
	if u == nil {
		return append(b, "null"...)
	}
	return UUID(b, *u)
}

// NullString appends *s, or null when s is nil.
func NullString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return String(b, *s)
}

// Time appends t as time.Time's MarshalJSON writes it (RFC 3339 with
// nanoseconds); it returns MarshalJSON's error for a time that has no such
// form (a year outside 0 to 9999).
func Time(b []byte, t time.Time) ([]byte, error) {
	_, offset := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || offset <= -24*3600 || offset >= 24*3600 {
		out, err := t.MarshalJSON()
		if err != nil {
			return b, err
		}
		return append(b, out...), nil
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// Raw appends the JSON text raw as encoding/json writes a json.RawMessage:
// null when nil, else compacted, with <, > and & escaped. It returns an
// error for text that is not JSON.
func Raw(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	if len(raw) == 0 || bytes.ContainsAny(raw, "<>&\u2028\u2029") {
		out, err := json.Marshal(raw)
		if err != nil {
			return b, err
		}
		return append(b, out...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, err
	}
	return buf.Bytes(), nil
}
