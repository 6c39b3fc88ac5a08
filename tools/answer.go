package tools

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/searchd/searchd/internal/canonjson"
)

// answer is the stored response of a completed call; the resource is in
// the claim's own columns.
type answer struct {
	OK            bool            `json:"ok"`
	Outcome       string          `json:"outcome"`
	Output        json.RawMessage `json:"output,omitempty"`
	OutputOmitted bool            `json:"output_omitted,omitempty"`
	Message       string          `json:"message,omitempty"`
	ResolvedBy    string          `json:"resolved_by,omitempty"`
}

// EncodeAnswer returns the stored form of res: JSON without HTML escaping,
// so the canonical Output is stored byte for byte.
func EncodeAnswer(res Result) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(answer{
		OK:            res.OK,
		Outcome:       res.Outcome,
		Output:        res.Output,
		OutputOmitted: res.OutputOmitted,
		Message:       res.Message,
		ResolvedBy:    res.ResolvedBy,
	}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// DecodeAnswer returns the Result a stored answer body holds, with the
// resource of the claim's columns, and its Output in canonical form. It
// returns an error for a body that is not an answer.
func DecodeAnswer(body json.RawMessage, resourceType, resourceID string) (Result, error) {
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return Result{}, fmt.Errorf("decoding the stored answer: %w", err)
	}
	if len(a.Output) > 0 {
		// jsonb reorders keys.
		canon, err := canonjson.Canonicalize(a.Output)
		if err != nil {
			return Result{}, fmt.Errorf("decoding the stored answer: %w", err)
		}
		a.Output = canon
	}
	return Result{
		OK:            a.OK,
		Outcome:       a.Outcome,
		Output:        a.Output,
		OutputOmitted: a.OutputOmitted,
		Message:       a.Message,
		ResolvedBy:    a.ResolvedBy,
		ResourceType:  resourceType,
		ResourceID:    resourceID,
	}, nil
}
