package toolrun

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/canonjson"
)

// KeyPrefix starts every tool key. It names the derivation, so a later one
// can never produce a key that collides with a stored one. The key holds
// nothing but ASCII letters, digits and underscores, which every vendor's
// idempotency header accepts.
const KeyPrefix = "tk1_"

// Key returns the idempotency key of the occurrence-th call (1 for the first)
// of toolName with input in the Run runID: KeyPrefix and the hex SHA-256 of
// those four things, the input in its canonical form (internal/canonjson), so
// the order of its keys and its white space do not change the key. The key is
// 68 bytes, and it is the key sent to a vendor that honours one. The model's
// tool-call id is deliberately not an argument (see the package
// documentation).
//
// Key returns an error wrapping [ErrInvalid] for a nil run id, an invalid
// tool name, an occurrence below 1 or an input that is not one JSON value.
func Key(runID uuid.UUID, toolName string, input json.RawMessage, occurrence int) (string, error) {
	canon, err := canonicalCall(toolName, input)
	if err != nil {
		return "", err
	}
	return key(runID, toolName, canon, occurrence)
}

// RequestHash returns the request hash of a call of toolName with input: the
// hex SHA-256 of the tool name and the canonical input. The plane stores it
// with the claim and refuses a key reused for a different request. Errors are
// as for [Key].
func RequestHash(toolName string, input json.RawMessage) (string, error) {
	canon, err := canonicalCall(toolName, input)
	if err != nil {
		return "", err
	}
	return requestHash(toolName, canon), nil
}

// canonicalCall validates toolName and returns input in canonical form.
func canonicalCall(toolName string, input json.RawMessage) (json.RawMessage, error) {
	if _, err := idempotency.Retention(idempotency.ToolScopePrefix + toolName); err != nil {
		return nil, fmt.Errorf("%w: tool name %q must be a dotted lower-case identifier of at most 100 bytes", ErrInvalid, toolName)
	}
	canon, err := canonjson.Canonicalize(input)
	if err != nil {
		return nil, fmt.Errorf("%w: input of %s is not one JSON value: %w", ErrInvalid, toolName, err)
	}
	return canon, nil
}

// key derives the key from a canonical input. The hashed document is itself
// canonical JSON, so no two different (run, tool, input, occurrence) can
// write the same bytes.
func key(runID uuid.UUID, toolName string, canon json.RawMessage, occurrence int) (string, error) {
	if runID == uuid.Nil {
		return "", fmt.Errorf("%w: run id is the nil UUID", ErrInvalid)
	}
	if occurrence < 1 {
		return "", fmt.Errorf("%w: occurrence %d must be at least 1", ErrInvalid, occurrence)
	}
	doc, err := canonjson.Marshal(struct {
		V          int             `json:"v"`
		RunID      uuid.UUID       `json:"run_id"`
		Tool       string          `json:"tool"`
		Input      json.RawMessage `json:"input"`
		Occurrence int             `json:"occurrence"`
	}{1, runID, toolName, canon, occurrence})
	if err != nil {
		return "", fmt.Errorf("tools: key: %w", err)
	}
	sum := sha256.Sum256(doc)
	return KeyPrefix + hex.EncodeToString(sum[:]), nil
}

func requestHash(toolName string, canon json.RawMessage) string {
	h := sha256.New()
	// A tool name holds no NUL byte, so the separator makes the split
	// between the name and the input unambiguous.
	h.Write([]byte(toolName))
	h.Write([]byte{0})
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}

// Occurrences counts, for one Run, how many times each identical call (the
// same tool and the same canonical input) has been proposed, so each gets its
// own key: the first is occurrence 1, the next identical one 2, and so on.
//
// The count is only as stable as the order it is fed in. Call [Occurrences.Next]
// once per proposed call, in the order the model proposed them, before any
// of them is dispatched, even when they then run concurrently. And feed it
// every call of the Run: a restarted segment rebuilds its counter by replaying
// the Run's calls from the first, so it derives the keys the earlier attempt
// derived and reads back their claims. A counter that started afresh in a
// later segment would give that segment's first repeat of an earlier call
// occurrence 1 again, and the journal would answer it with the earlier
// call's result instead of making it.
//
// An Occurrences is safe for concurrent use, but concurrent callers number
// calls in whatever order they reach it. The zero value is ready to use.
type Occurrences struct {
	mu   sync.Mutex
	seen map[string]int
}

// Next records one more call of toolName with input and returns its
// occurrence, from 1. It returns an error wrapping [ErrInvalid], and records
// nothing, for an invalid tool name or an input that is not one JSON value.
func (o *Occurrences) Next(toolName string, input json.RawMessage) (int, error) {
	hash, err := RequestHash(toolName, input)
	if err != nil {
		return 0, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = make(map[string]int)
	}
	o.seen[hash]++
	return o.seen[hash], nil
}
