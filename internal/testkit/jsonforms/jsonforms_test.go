package jsonforms

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Every form decodes to the value it was written from, and the forms differ.
func TestFormsDecodeToTheirValue(t *testing.T) {
	t.Parallel()
	v := map[string]any{
		"name":   "quote \" slash \\ / tab \t nul \x00 astral 😀 é",
		"n":      json.Number("12345678901234567890.5e-3"),
		"list":   []any{nil, true, false, json.Number("0"), "", map[string]any{}},
		"nested": map[string]any{"b": []any{}, "a": map[string]any{"z": "y"}},
	}
	forms := map[string]bool{}
	for seed := range uint64(50) {
		form := Writer{Rng: rand.New(rand.NewPCG(seed, 1))}.Value(v)
		forms[string(form)] = true
		dec := json.NewDecoder(bytes.NewReader(form))
		dec.UseNumber()
		var got any
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("seed %d: %s does not decode: %v", seed, form, err)
		}
		if !reflect.DeepEqual(got, any(v)) {
			t.Fatalf("seed %d: %s decodes to %#v, want %#v", seed, form, got, v)
		}
	}
	if len(forms) < 45 {
		t.Errorf("50 seeds wrote %d distinct forms, want nearly as many", len(forms))
	}
}
