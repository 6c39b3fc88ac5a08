package admission

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-playground/validator/v10"
	"github.com/google/uuid"

	"github.com/searchd/searchd/errs"
)

// TestStartOptionRulesAreStatedOnce: NewStartOptions (what an edge asks),
// the replay path's hand-written check (valid) and the validator
// (optionRules) agree on every boundary, and a refusal is an errs.Invalid
// naming the Go field.
func TestStartOptionRulesAreStatedOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		max   *int
		note  *string
		field string // "" when accepted
	}{
		{"both omitted: the defaults", nil, nil, ""},
		{"max_results 1", new(1), nil, ""},
		{"max_results 1000", new(MaxMaxResults), nil, ""},
		{"max_results 0 given", new(0), nil, "MaxResults"},
		{"max_results negative", new(-1), nil, "MaxResults"},
		{"max_results 1001", new(MaxMaxResults + 1), nil, "MaxResults"},
		{"note of 500 characters", nil, new(strings.Repeat("é", MaxNoteLen)), ""},
		{"note of 501 characters", nil, new(strings.Repeat("é", MaxNoteLen+1)), "Note"},
	} {
		o, err := NewStartOptions(tt.max, tt.note)
		var verrs validator.ValidationErrors
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: NewStartOptions = %v, want accepted", tt.name, err)
		case tt.field == "":
			if tt.max != nil && o.MaxResults != *tt.max || tt.max == nil && o.MaxResults != 0 {
				t.Errorf("%s: MaxResults = %d", tt.name, o.MaxResults)
			}
			if !o.Normalize().valid() || o.Normalize().validate() != nil {
				t.Errorf("%s: accepted options %+v fail the start's own check", tt.name, o)
			}
		case !errors.Is(err, ErrInvalid) || !errs.Is(err, errs.Invalid) || !errors.As(err, &verrs) ||
			len(verrs) != 1 || verrs[0].Field() != tt.field:
			t.Errorf("%s: NewStartOptions = %v, want ErrInvalid naming %s", tt.name, err, tt.field)
		}
		if tt.field != "" && tt.max != nil && *tt.max != 0 {
			bad := StartOptions{MaxResults: *tt.max}.Normalize()
			if bad.valid() || bad.validate() == nil {
				t.Errorf("%s: the start's own check accepts %+v", tt.name, bad)
			}
		}
	}
}

// TestDirectStartValidateNamesTheFields: the rules of a direct start, in
// the order an edge reports them, each refusal an errs.Invalid wrapping
// ErrInvalid.
func TestDirectStartValidateNamesTheFields(t *testing.T) {
	t.Parallel()
	ok := DirectStart{Org: uuid.New(), Kind: "capability", Name: "n", IdempotencyKey: "k"}
	for _, tt := range []struct {
		name   string
		edit   func(p *DirectStart)
		fields []string // the Go fields of a validator refusal, or the errs.Field names
	}{
		{"valid, no input", func(*DirectStart) {}, nil},
		{"valid, null input", func(p *DirectStart) { p.Input = json.RawMessage(" null ") }, nil},
		{"valid, input at the limit", func(p *DirectStart) {
			p.Input = json.RawMessage(`{"a":"` + strings.Repeat("x", MaxInputBytes-8) + `"}`)
		}, nil},
		{"kind and name refused together", func(p *DirectStart) { p.Kind, p.Name = "other", "" }, []string{"Kind", "Name"}},
		{"name too long, input not an object too", func(p *DirectStart) {
			p.Name, p.Input = strings.Repeat("n", 201), json.RawMessage(`[]`)
		}, []string{"Name"}},
		{"input an array", func(p *DirectStart) { p.Input = json.RawMessage(` [1]`) }, []string{"input"}},
		{"input over the limit", func(p *DirectStart) {
			p.Input = json.RawMessage(`{"a":"` + strings.Repeat("x", MaxInputBytes) + `"}`)
		}, []string{"input"}},
	} {
		p := ok
		tt.edit(&p)
		err := p.Validate()
		if tt.fields == nil {
			if err != nil {
				t.Errorf("%s: Validate = %v, want nil", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !errs.Is(err, errs.Invalid) {
			t.Errorf("%s: Validate = %v, want an errs.Invalid wrapping ErrInvalid", tt.name, err)
			continue
		}
		var got []string
		var verrs validator.ValidationErrors
		if errors.As(err, &verrs) {
			for _, fe := range verrs {
				got = append(got, fe.Field())
			}
		} else {
			for _, f := range errs.FieldsOf(err) {
				got = append(got, f.Name)
			}
		}
		if strings.Join(got, ",") != strings.Join(tt.fields, ",") {
			t.Errorf("%s: Validate names %v, want %v", tt.name, got, tt.fields)
		}
	}
}
