package jsonforms

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestMutateFirstChangesTheFirstLeafInSortedOrder(t *testing.T) {
	t.Parallel()
	v := map[string]any{
		"b": []any{json.Number("1e2"), "s"},
		"a": map[string]any{"y": json.Number("1.5"), "x": true},
		"c": json.Number("7"),
	}
	tests := []struct {
		kind LeafKind
		want any
	}{
		{NumberLeaf, map[string]any{
			"b": []any{json.Number("1e2"), "s"},
			"a": map[string]any{"y": json.Number("1.50"), "x": true},
			"c": json.Number("7"),
		}},
		{StringLeaf, map[string]any{
			"b": []any{json.Number("1e2"), "sx"},
			"a": map[string]any{"y": json.Number("1.5"), "x": true},
			"c": json.Number("7"),
		}},
	}
	for _, tt := range tests {
		got, ok := MutateFirst(v, tt.kind)
		if !ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("MutateFirst(v, %d) = %v, %v; want %v, true", tt.kind, got, ok, tt.want)
		}
	}
	if !reflect.DeepEqual(v["a"], map[string]any{"y": json.Number("1.5"), "x": true}) {
		t.Errorf("MutateFirst modified its input: %v", v)
	}
	for in, want := range map[json.Number]json.Number{"1": "1.0", "1.5": "1.50", "1e2": "1E2", "1E2": "1e2"} {
		if got, _ := MutateFirst(in, NumberLeaf); got != want {
			t.Errorf("MutateFirst(%s, NumberLeaf) = %v, want %s", in, got, want)
		}
	}
	if _, ok := MutateFirst([]any{true, nil}, StringLeaf); ok {
		t.Error("MutateFirst found a string leaf in [true, null]")
	}
}

func TestWithAndWithoutCopy(t *testing.T) {
	t.Parallel()
	m := map[string]any{"a": 1, "b": 2}
	if got := With(m, "c", 3); !reflect.DeepEqual(got, map[string]any{"a": 1, "b": 2, "c": 3}) {
		t.Errorf("With(m, c, 3) = %v", got)
	}
	if got := Without(m, "a"); !reflect.DeepEqual(got, map[string]any{"b": 2}) {
		t.Errorf("Without(m, a) = %v", got)
	}
	if len(m) != 2 {
		t.Errorf("With/Without modified their input: %v", m)
	}
}
