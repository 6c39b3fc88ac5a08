package api

import (
	"reflect"
	"testing"

	"github.com/searchd/searchd/savedsearch"
)

// TestHasRulesFindsEveryValidateTag: decodeBody skips the validator for a
// type with no validate tag anywhere, so hasRules must find a tag however
// deep it sits, and must end on a type that holds itself.
func TestHasRulesFindsEveryValidateTag(t *testing.T) {
	type deep struct {
		Name string `validate:"required"`
	}
	type viaSlice struct{ Items *[]map[string]deep }
	type viaMapKey struct{ M map[deep]int }
	type self struct {
		Next *self
		Kids []self
	}
	type dashed struct {
		A string `validate:"-"`
		B string `validate:""`
	}
	for _, tt := range []struct {
		v    any
		want bool
	}{
		{&startRequest{}, false},
		{&directStartRequest{}, false},
		{&savedsearch.CreateParams{}, true}, // its rules are in Brief and Baseline
		{&registerProviderJobRequest{}, true},
		{&viaSlice{}, true},
		{&viaMapKey{}, true},
		{&self{}, false},
		{&dashed{}, false},
	} {
		if got := hasRules(reflect.TypeOf(tt.v)); got != tt.want {
			t.Errorf("hasRules(%T) = %v, want %v", tt.v, got, tt.want)
		}
	}
}
