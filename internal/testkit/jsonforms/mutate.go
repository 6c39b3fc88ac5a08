package jsonforms

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Near-miss builders for fuzz targets that check two values are told
// apart. They never modify their input.

// With returns a copy of m with m[k] set to v.
func With(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	maps.Copy(out, m)
	out[k] = v
	return out
}

// Without returns a copy of m without the member k.
func Without(m map[string]any, k string) map[string]any {
	out := With(m, k, nil)
	delete(out, k)
	return out
}

// LeafKind names the kind of leaf [MutateFirst] changes.
type LeafKind int

const (
	// NumberLeaf is a json.Number.
	NumberLeaf LeafKind = iota
	// StringLeaf is a string.
	StringLeaf
)

// MutateFirst returns a copy of v with its first leaf of kind (in sorted
// key order) changed: a number to an equal literal (1 → 1.0, 1e2 → 1E2) or
// a string by one more character. It reports false if there is no such
// leaf.
func MutateFirst(v any, kind LeafKind) (any, bool) {
	switch x := v.(type) {
	case json.Number:
		if kind == NumberLeaf {
			return otherLiteral(x), true
		}
	case string:
		if kind == StringLeaf {
			return x + "x", true
		}
	case []any:
		for i, e := range x {
			if m, ok := MutateFirst(e, kind); ok {
				out := slices.Clone(x)
				out[i] = m
				return out, true
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if m, ok := MutateFirst(x[k], kind); ok {
				return With(x, k, m), true
			}
		}
	}
	return v, false
}

// otherLiteral writes n differently with the same value.
func otherLiteral(n json.Number) json.Number {
	s := string(n)
	switch {
	case strings.Contains(s, "e"):
		return json.Number(strings.Replace(s, "e", "E", 1))
	case strings.Contains(s, "E"):
		return json.Number(strings.Replace(s, "E", "e", 1))
	case strings.Contains(s, "."):
		return n + "0"
	}
	return n + ".0"
}
