package auth

import (
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
)

// errLooseJSON refuses a header or claims set that is not one exact JSON
// object: duplicate names, wrongly typed registered claims, or string dates.
var errLooseJSON = errors.New("auth: token JSON is not one exact object")

// claims is a token's claims set, read by exact names. encoding/json
// matches names case-insensitively and keeps the last duplicate, so
// "ORG_ID" would pass as org_id; and jwt.NumericDate accepts strings.
type claims struct {
	jwt.RegisteredClaims
	// members holds every member by exact name.
	members map[string]json.RawMessage
}

// UnmarshalJSON decodes data exactly, or returns an error wrapping
// errLooseJSON.
func (c *claims) UnmarshalJSON(data []byte) error {
	if err := refuseDuplicateNames(data); err != nil {
		return err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return errLooseJSON
	}
	for _, name := range []string{"exp", "nbf", "iat"} {
		if raw, ok := members[name]; ok && !isJSONNumber(raw) {
			return fmt.Errorf("%w: %s is not a number", errLooseJSON, name)
		}
	}
	*c = claims{members: members}
	// json v2 matches names exactly; invalid UTF-8 passes, as above.
	if err := jsonv2.Unmarshal(data, &c.RegisteredClaims, jsontext.AllowInvalidUTF8(true)); err != nil {
		return fmt.Errorf("%w: %v", errLooseJSON, err)
	}
	return nil
}

// isJSONNumber reports whether raw is a JSON number.
func isJSONNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// str returns member name; ok is false when absent, err set when not a
// string.
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

// strs returns member name, a string or an array of strings, as a list.
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
// with no duplicate names at any depth. Invalid UTF-8 passes, as in
// encoding/json.
func refuseDuplicateNames(data []byte) error {
	if v := jsontext.Value(data); v.Kind() != '{' || !v.IsValid(jsontext.AllowInvalidUTF8(true)) {
		return errLooseJSON
	}
	return nil
}

var _ jwt.Claims = (*claims)(nil)
