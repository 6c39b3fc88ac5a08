package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/golang-jwt/jwt/v5"
)

// errLooseClaims is returned for a claims set the API will not read: a
// duplicate member name anywhere in it, or a member of a registered or
// searchd claim name holding the wrong JSON type.
var errLooseClaims = errors.New("api: token claims are not one exact JSON object")

// UnmarshalJSON decodes a token's claims exactly. encoding/json alone would
// match member names case-insensitively and keep the last of duplicates, so
// a token whose only tenant claim is "ORG_ID", or one holding both
// "org_id" and "Org_Id", would authenticate as an organization nobody
// named exactly. Here a member counts only under its exact name, and a
// claims set with any name twice (at any depth) is refused: the parser
// then answers an error, and the request a 401.
func (c *Claims) UnmarshalJSON(data []byte) error {
	if err := refuseDuplicateNames(data); err != nil {
		return err
	}
	// Map keys are compared exactly, and after the check above each is
	// unique, so every lookup below sees the one member of that name.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return errLooseClaims
	}
	*c = Claims{}
	for _, f := range []struct {
		name string
		dst  any
	}{
		{"org_id", &c.OrgID},
		{"role", &c.Role},
		{"sub", &c.Subject},
		{"iss", &c.Issuer},
		{"jti", &c.ID},
		{"aud", &c.Audience},
		{"exp", &c.ExpiresAt},
		{"nbf", &c.NotBefore},
		{"iat", &c.IssuedAt},
	} {
		raw, ok := members[f.name]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return fmt.Errorf("%w: %s", errLooseClaims, f.name)
		}
	}
	return nil
}

// refuseDuplicateNames returns errLooseClaims unless data is one JSON object
// in which no object, at any depth, names a member twice.
func refuseDuplicateNames(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err != nil || !ok || d != '{' {
		return errLooseClaims
	}
	if err := uniqueMembers(dec, '{'); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errLooseClaims
	}
	return nil
}

// uniqueMembers reads the rest of an object or array whose opening
// delimiter open was just read, refusing duplicate member names.
func uniqueMembers(dec *json.Decoder, open json.Delim) error {
	seen := map[string]bool{}
	for dec.More() {
		if open == '{' {
			tok, err := dec.Token()
			if err != nil {
				return errLooseClaims
			}
			name, _ := tok.(string)
			if seen[name] {
				return fmt.Errorf("%w: %q appears more than once", errLooseClaims, name)
			}
			seen[name] = true
		}
		tok, err := dec.Token()
		if err != nil {
			return errLooseClaims
		}
		if d, ok := tok.(json.Delim); ok {
			if err := uniqueMembers(dec, d); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return errLooseClaims
	}
	return nil
}

// The registered claims' own decoding is replaced above; this keeps the
// compiler checking that Claims still is a jwt.Claims.
var _ jwt.Claims = (*Claims)(nil)
