package auth

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
)

// errLooseJSON is returned for a header or claims set the package will not
// read: not one JSON object, a duplicate member name anywhere in it, a
// member of a registered claim holding the wrong JSON type, or a
// NumericDate written as a string.
var errLooseJSON = errors.New("auth: token JSON is not one exact object")

// claims is a token's claims set, read exactly. encoding/json alone would
// match member names case-insensitively and keep the last of duplicates,
// so a token whose only tenant claim is "ORG_ID", or one holding both
// "org_id" and "Org_Id", would authenticate as an organization nobody
// named exactly; and jwt.NumericDate reads "exp": "1700000000", a string,
// as a date. Here a member counts only under its exact name, a claims set
// with any name twice (at any depth) is refused, and exp, nbf and iat must
// be JSON numbers.
type claims struct {
	jwt.RegisteredClaims
	// members holds every member, by exact name, for the claims the
	// configuration names (organization, actor, role, nonce).
	members map[string]json.RawMessage
}

// UnmarshalJSON decodes data exactly, or returns an error wrapping
// errLooseJSON.
func (c *claims) UnmarshalJSON(data []byte) error {
	if err := refuseDuplicateNames(data); err != nil {
		return err
	}
	// Map keys are compared exactly, and after the check above each is
	// unique, so every lookup below sees the one member of that name.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return errLooseJSON
	}
	*c = claims{members: members}
	for _, f := range []struct {
		name string
		dst  any
	}{
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
		if _, date := f.dst.(**jwt.NumericDate); date && !isJSONNumber(raw) {
			return fmt.Errorf("%w: %s is not a number", errLooseJSON, f.name)
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return fmt.Errorf("%w: %s", errLooseJSON, f.name)
		}
	}
	return nil
}

// isJSONNumber reports whether raw is a JSON number (and not null, a
// string or anything else): its first byte is a digit or a minus sign.
func isJSONNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// str returns the member name as a string: ok is false when it is absent,
// and err is set when it is present but not a string.
func (c *claims) str(name string) (s string, ok bool, err error) {
	raw, ok := c.members[name]
	if !ok {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil || raw[0] != '"' {
		return "", true, fmt.Errorf("%w: %s is not a string", errLooseJSON, name)
	}
	return s, true, nil
}

// strs returns the member name as a list of strings: a string alone, or
// an array of strings (how providers write roles and groups).
func (c *claims) strs(name string) ([]string, error) {
	raw, ok := c.members[name]
	if !ok {
		return nil, nil
	}
	var one string
	if raw[0] == '"' && json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if raw[0] != '[' || json.Unmarshal(raw, &many) != nil {
		return nil, fmt.Errorf("%w: %s is not a string or an array of strings", errLooseJSON, name)
	}
	return many, nil
}

// refuseDuplicateNames returns errLooseJSON unless data is one JSON object
// in which no object, at any depth, names a member twice (jsontext's
// default). Invalid UTF-8 is let through, as encoding/json reads it.
func refuseDuplicateNames(data []byte) error {
	if v := jsontext.Value(data); v.Kind() != '{' || !v.IsValid(jsontext.AllowInvalidUTF8(true)) {
		return errLooseJSON
	}
	return nil
}

// The registered claims' own decoding is replaced above; this keeps the
// compiler checking that claims still is a jwt.Claims.
var _ jwt.Claims = (*claims)(nil)
