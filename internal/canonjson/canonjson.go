// Package canonjson writes JSON in one canonical form, so that two documents
// that mean the same thing hash the same: object keys sorted by their UTF-8
// bytes, no insignificant white space, strings escaped by encoding/json's
// rules but without HTML escaping, and numbers kept exactly as written.
//
// Numbers are not reinterpreted: 1 and 1.0 stay different. Rounding them
// through float64 would make two large integers that differ hash the same,
// and a request hash that merges different requests is the worse mistake.
package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Canonicalize returns the canonical form of the single JSON value raw. It
// returns an error when raw is not exactly one valid JSON value (white space
// around it is allowed).
func Canonicalize(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonjson: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("canonjson: data after the JSON value")
	}
	return encode(v)
}

// Marshal encodes v with encoding/json and returns the canonical form.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonjson: %w", err)
	}
	return Canonicalize(raw)
}

// encode writes a value decoded with UseNumber: encoding/json already sorts
// map keys and writes no white space; only HTML escaping must be turned off.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonjson: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
