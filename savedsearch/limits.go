package savedsearch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/searchd/searchd/errs"
)

// Size limits of a saved search. Every start copies it into a snapshot kept
// 396 days, so size multiplies. Checked before any SQL on create, update
// and baseline replace; older rows are never re-checked.
const (
	// MaxCursorBytes bounds a baseline cursor.
	MaxCursorBytes = 4 << 10
	// MaxFilterDepth bounds filter nesting; the filters object is level 1.
	MaxFilterDepth = 8
	// MaxFilterKeys bounds object members in filters, at every depth.
	MaxFilterKeys = 256
	// MaxFilterBytes bounds filters as JSON.
	MaxFilterBytes = 16 << 10
	// MaxBriefBytes bounds the brief as JSON.
	MaxBriefBytes = 32 << 10
	// MaxBaselineBytes bounds the baseline (items and cursor) as JSON.
	MaxBaselineBytes = 1 << 20
	// MaxSavedSearchBytes bounds brief and baseline together. It is the sum
	// of their bounds, so a baseline replace can check it without reading
	// the brief.
	MaxSavedSearchBytes = MaxBriefBytes + MaxBaselineBytes
)

// FieldError names one refused field by JSON path and the limit it breaks.
type FieldError = errs.Field

// LimitError refuses input over a size limit. It matches [ErrInvalid].
type LimitError struct {
	Fields []FieldError
}

// ErrorFields returns the refused fields, for errs.FieldsOf.
func (e *LimitError) ErrorFields() []errs.Field { return e.Fields }

func (e *LimitError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Name + " " + f.Message
	}
	return strings.Join(parts, "; ")
}

// checkBriefLimits returns the limit b breaks, if any.
func checkBriefLimits(b *Brief, field string) []FieldError {
	if len(b.Filters) > 0 {
		raw, err := json.Marshal(b.Filters)
		if err != nil {
			return refused(field, "filters", "cannot be encoded as JSON")
		}
		switch depth, keys := filterShape(raw); {
		case len(raw) > MaxFilterBytes:
			return refused(field, "filters", "must be at most %d bytes of JSON (the filter size limit); it is %d", MaxFilterBytes, len(raw))
		case depth > MaxFilterDepth:
			return refused(field, "filters", "must nest at most %d levels (the filter depth limit); it nests %d", MaxFilterDepth, depth)
		case keys > MaxFilterKeys:
			return refused(field, "filters", "must hold at most %d object members at all depths (the filter key limit); it holds %d", MaxFilterKeys, keys)
		}
	}
	if raw, err := json.Marshal(b); err == nil && len(raw) > MaxBriefBytes {
		return refused(field, "", "must be at most %d bytes of JSON (the brief size limit); it is %d", MaxBriefBytes, len(raw))
	}
	return nil
}

// checkBaselineLimits returns the limit b breaks, if any.
func checkBaselineLimits(b *Baseline, field string) []FieldError {
	if b.Cursor != nil && len(*b.Cursor) > MaxCursorBytes {
		return refused(field, "cursor", "must be at most %d bytes (the cursor limit); it is %d", MaxCursorBytes, len(*b.Cursor))
	}
	// The JSON size without encoding: quotes and a comma per item, plus escapes.
	size := len(`{"items":[],"cursor":null}`)
	for _, it := range b.Items {
		size += jsonStringLen(it) + 1
		if size > MaxBaselineBytes {
			break
		}
	}
	if b.Cursor != nil {
		size += jsonStringLen(*b.Cursor)
	}
	if size > MaxBaselineBytes {
		return refused(field, "items", "with the cursor, must be at most %d bytes of JSON (the baseline size limit)", MaxBaselineBytes)
	}
	return nil
}

func refused(field, name, format string, args ...any) []FieldError {
	return []FieldError{{Name: strings.Trim(field+"."+name, "."), Message: fmt.Sprintf(format, args...)}}
}

func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 6
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9):
			n += 6 // U+2028, U+2029
			i += 2
		default:
			n++
		}
	}
	return n
}

// filterShape returns the nesting depth and member count of the object raw.
func filterShape(raw []byte) (depth, keys int) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var stack []bool // true for an object
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return depth, keys
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, tok == json.Delim('{'))
			depth = max(depth, len(stack))
			expectKey = tok == json.Delim('{')
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			expectKey = len(stack) > 0 && stack[len(stack)-1]
		default:
			if len(stack) > 0 && stack[len(stack)-1] {
				if expectKey {
					keys++
				}
				expectKey = !expectKey
			}
		}
	}
}

func limitError(fields []FieldError) error {
	if len(fields) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, &LimitError{Fields: fields})
}
