package tools

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/searchd/searchd/internal/canonjson"
)

// EncodeAnswer returns the stored form of res: JSON without HTML escaping,
// so the canonical Output is stored byte for byte.
func EncodeAnswer(res Result) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// DecodeAnswer returns the Result a stored answer body holds, with the
// resource of the claim's columns, and its Output in canonical form. It
// returns an error for a body that is not an answer.
func DecodeAnswer(body json.RawMessage, resourceType, resourceID string) (Result, error) {
	var res Result
	if err := json.Unmarshal(body, &res); err != nil {
		return Result{}, fmt.Errorf("decoding the stored answer: %w", err)
	}
	if len(res.Output) > 0 {
		// jsonb reorders keys.
		canon, err := canonjson.Canonicalize(res.Output)
		if err != nil {
			return Result{}, fmt.Errorf("decoding the stored answer: %w", err)
		}
		res.Output = canon
	}
	res.ResourceType, res.ResourceID = resourceType, resourceID
	return res, nil
}
