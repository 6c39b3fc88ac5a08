package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

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

// StartOptions are the options of a saved-search start. Their JSON is stored
// on the Run and covered by [SavedSearchRequestHash], so its names never change.
type StartOptions struct {
	// MaxResults is 1 to [MaxMaxResults]; zero means DefaultMaxResults.
	MaxResults int `json:"max_results"`
	// Note is up to [MaxNoteLen] characters; empty by default.
	Note string `json:"note"`
}

// optionRules are the options' rules: a field given (non-nil) must be in
// range; one omitted takes its default.
type optionRules struct {
	MaxResults *int    `validate:"omitnil,min=1,max=1000"`
	Note       *string `validate:"omitnil,max=500"`
}

// NewStartOptions returns the options of a start; a nil argument takes its
// default. A given value out of range (an explicit max_results of 0 too) is
// an errs.Invalid error wrapping [ErrInvalid] and validator.ValidationErrors.
func NewStartOptions(maxResults *int, note *string) (StartOptions, error) {
	var o StartOptions
	if maxResults != nil {
		o.MaxResults = *maxResults
	}
	if note != nil {
		o.Note = *note
	}
	// A given max_results of 0 is refused (omitting it asks for the
	// default), so the hand check applies to o as given, not normalized.
	if (maxResults == nil || o.MaxResults != 0) && o.Normalize().valid() {
		return o, nil
	}
	if err := check(optionRules{MaxResults: maxResults, Note: note}); err != nil {
		return StartOptions{}, err
	}
	return o, nil
}

// Normalize returns o with its defaults applied.
func (o StartOptions) Normalize() StartOptions {
	if o.MaxResults == 0 {
		o.MaxResults = DefaultMaxResults
	}
	return o
}

// Request-hash domains keep a saved-search and a direct hash apart; a later
// encoding gets a new version.
const (
	savedSearchHashDomain = "searchd.saved_search.start.v1\n"
	directHashDomain      = "searchd.direct.start.v1\n"
)

// SavedSearchRequestHash returns the hex SHA-256 of the canonical JSON of the
// saved search id and the normalized options.
func SavedSearchRequestHash(savedSearchID uuid.UUID, o StartOptions) string {
	o = o.Normalize()
	// The canonjson bytes, written directly for speed; a note needing
	// escaping goes through canonjson. A test pins both paths to the same bytes.
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

func canonicalSavedSearchRequest(savedSearchID uuid.UUID, o StartOptions) []byte {
	doc, err := canonjson.Marshal(struct {
		SavedSearchID uuid.UUID    `json:"saved_search_id"`
		Options       StartOptions `json:"options"`
	}{savedSearchID, o})
	if err != nil {
		panic(fmt.Sprintf("admission: encoding a saved-search request: %v", err))
	}
	return doc
}

// plainJSONString reports whether s is printable ASCII without a quote or
// a backslash, so copying it between quotes is its JSON.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// DirectRequestHash returns the hex SHA-256 of the canonical JSON of kind,
// name and input (empty or null input is {}). It returns an error wrapping
// [ErrInvalid] when input is not a JSON object.
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

// canonicalInput returns the input as hashed and stored; empty and null are {}.
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

// valid reports whether o, normalized, passes [optionRules], by hand: the
// replay path runs it on every start, where the validator's reflection
// costs more than the rest of the checks together (docs/benchmarks.md,
// Hand-tuned JSON paths). A false answer goes to the validator, which
// names the field; a test pins the two to the same verdicts.
func (o StartOptions) valid() bool {
	return o.MaxResults >= 1 && o.MaxResults <= MaxMaxResults &&
		(len(o.Note) <= MaxNoteLen || utf8.RuneCountInString(o.Note) <= MaxNoteLen)
}

// validate checks o, normalized, against [optionRules]: nil, or an error
// wrapping [ErrInvalid] and the validator's errors.
func (o StartOptions) validate() error {
	if o.valid() {
		return nil
	}
	return check(optionRules{MaxResults: &o.MaxResults, Note: &o.Note})
}
