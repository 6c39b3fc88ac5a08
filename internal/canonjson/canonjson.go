// Package canonjson writes JSON in one canonical form so that equal
// documents hash the same: keys sorted by UTF-8 bytes, no white space,
// encoding/json's string escaping without HTML escaping, and numbers exactly
// as written (1 and 1.0 differ; rounding through float64 could make
// different requests hash the same).
package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Canonicalize returns the canonical form of the single JSON value raw, or
// an error if raw is not exactly one valid value.
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

// encode writes a UseNumber-decoded value; encoding/json already sorts map
// keys and adds no white space.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonjson: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
