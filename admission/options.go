package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/canonjson"
	"github.com/searchd/searchd/internal/jsonenc"
)

// Defaults and limits of [StartOptions].
const (
	DefaultMaxResults = 100
	MaxMaxResults     = 1000
	MaxNoteLen        = 500
)

// StartOptions are the options of a saved-search start. Their JSON is the
// document a Run stores as its options and the request hash covers (see
// [SavedSearchRequestHash]), so its names never change; an HTTP body is
// the API's own type, translated with [NewStartOptions].
type StartOptions struct {
	// MaxResults is 1 to [MaxMaxResults]; zero means DefaultMaxResults.
	MaxResults int `json:"max_results"`
	// Note is up to [MaxNoteLen] characters; empty by default.
	Note string `json:"note"`
}

// optionRules are the rules of the options, the one place they are
// stated: a field given (non-nil) must be in range; a field omitted takes
// its default. The validator's errors name the Go fields (MaxResults,
// Note), which an edge spells as it spells its own inputs.
type optionRules struct {
	MaxResults *int    `validate:"omitnil,min=1,max=1000"`
	Note       *string `validate:"omitnil,max=500"`
}

// NewStartOptions returns the options of a start that gives maxResults
// and note, nil for one omitted (its default). It returns an error of
// kind errs.Invalid wrapping [ErrInvalid] and the validator.ValidationErrors
// that name each refused field when a given value is out of range: a
// max_results of 0 given explicitly is refused, since omitting it is how
// a caller asks for the default.
func NewStartOptions(maxResults *int, note *string) (StartOptions, error) {
	var o StartOptions
	if maxResults != nil {
		o.MaxResults = *maxResults
	}
	if note != nil {
		o.Note = *note
	}
	if err := check(optionRules{MaxResults: maxResults, Note: note}); err != nil {
		return StartOptions{}, err
	}
	return o, nil
}

// Normalize returns o with its defaults applied, so that an omitted field
// and the same field set to its default are one request.
func (o StartOptions) Normalize() StartOptions {
	if o.MaxResults == 0 {
		o.MaxResults = DefaultMaxResults
	}
	return o
}

// Request-hash domains: a saved-search hash and a direct hash can never be
// equal by accident, and a later encoding gets a new version.
const (
	savedSearchHashDomain = "searchd.saved_search.start.v1\n"
	directHashDomain      = "searchd.direct.start.v1\n"
)

// SavedSearchRequestHash returns the request hash of a saved-search start:
// the hex SHA-256 of the canonical JSON of the saved search id and the
// normalized options. Requests written differently (key order, white space,
// an omitted field equal to its default) decode to the same options and
// hash the same; requests that differ in any option or in the saved search
// hash differently.
func SavedSearchRequestHash(savedSearchID uuid.UUID, o StartOptions) string {
	o = o.Normalize()
	// The document is three known fields, so it is written directly: the
	// bytes canonjson would write (keys sorted, no white space), without
	// its reflection, decode and re-encode, which were most of what a
	// replay spent in Go. A note that needs escaping takes canonjson's
	// path, so every hash stays what it always was; a test pins the two
	// paths to the same bytes.
	if plainJSONString(o.Note) {
		var buf [160]byte
		doc := append(buf[:0], `{"options":{"max_results":`...)
		doc = strconv.AppendInt(doc, int64(o.MaxResults), 10)
		doc = append(doc, `,"note":"`...)
		doc = append(doc, o.Note...)
		doc = append(doc, `"},"saved_search_id":`...)
		doc = jsonenc.UUID(doc, savedSearchID)
		doc = append(doc, '}')
		return hashDoc(savedSearchHashDomain, doc)
	}
	return hashDoc(savedSearchHashDomain, canonicalSavedSearchRequest(savedSearchID, o))
}

// canonicalSavedSearchRequest is the canonical document of a saved-search
// request, through canonjson.
func canonicalSavedSearchRequest(savedSearchID uuid.UUID, o StartOptions) []byte {
	doc, err := canonjson.Marshal(struct {
		SavedSearchID uuid.UUID    `json:"saved_search_id"`
		Options       StartOptions `json:"options"`
	}{savedSearchID, o})
	if err != nil {
		// A uuid, an int and a string always encode.
		panic(fmt.Sprintf("admission: encoding a saved-search request: %v", err))
	}
	return doc
}

// plainJSONString reports whether s is written as a JSON string by copying
// it between quotes: printable ASCII without a quote or a backslash.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// DirectRequestHash returns the request hash of a direct start: the hex
// SHA-256 of the canonical JSON (sorted keys, no white space, numbers as
// written) of kind, name and input. An empty or null input is the empty
// object. It returns an error wrapping [ErrInvalid] when input is not a JSON
// object.
func DirectRequestHash(kind, name string, input json.RawMessage) (string, error) {
	canon, err := canonicalInput(input)
	if err != nil {
		return "", err
	}
	return directHash(kind, name, canon), nil
}

func directHash(kind, name string, canonInput json.RawMessage) string {
	doc, err := canonjson.Marshal(struct {
		Kind  string          `json:"kind"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}{kind, name, canonInput})
	if err != nil {
		panic(fmt.Sprintf("admission: encoding a direct request: %v", err))
	}
	return hashDoc(directHashDomain, doc)
}

// canonicalInput returns the canonical form of a direct start's input, the
// form both hashed and stored. Empty and null are the empty object.
func canonicalInput(input json.RawMessage) (json.RawMessage, error) {
	if len(input) == 0 {
		return json.RawMessage(`{}`), nil
	}
	canon, err := canonjson.Canonicalize(input)
	if err != nil {
		return nil, fmt.Errorf("%w: input: %w", ErrInvalid, err)
	}
	switch {
	case string(canon) == "null":
		return json.RawMessage(`{}`), nil
	case canon[0] != '{':
		return nil, fmt.Errorf("%w: input is not a JSON object", ErrInvalid)
	}
	return canon, nil
}

func hashDoc(domain string, doc []byte) string {
	h := sha256.New()
	h.Write([]byte(domain))
	h.Write(doc)
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// validate checks o, normalized, against [optionRules]: nil, or an error
// wrapping [ErrInvalid] and the validator's errors.
func (o StartOptions) validate() error {
	return check(optionRules{MaxResults: &o.MaxResults, Note: &o.Note})
}
