package errs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/searchd/searchd/errs"
)

// typed is a domain's typed error that carries data and says its kind.
type typed struct{ wait int }

func (typed) Error() string        { return "typed" }
func (typed) ErrorKind() errs.Kind { return errs.InProgress }

func TestKindOfFindsTheFirstKindInTheChain(t *testing.T) {
	t.Parallel()
	errNotFound := errs.New(errs.NotFound, "thing: not found")
	cause := errors.New("driver: connection reset")
	tests := []struct {
		name string
		err  error
		want errs.Kind
	}{
		{"nil", nil, ""},
		{"no kind", errors.New("bug"), errs.Internal},
		{"a sentinel", errNotFound, errs.NotFound},
		{"a wrapped sentinel", fmt.Errorf("layer: %w", errNotFound), errs.NotFound},
		{"a typed error", fmt.Errorf("layer: %w", typed{}), errs.InProgress},
		{"a wrapped cause", errs.Wrap(errs.Unavailable, cause), errs.Unavailable},
		{"the outer kind wins", errs.Wrap(errs.Unavailable, errNotFound), errs.Unavailable},
		{"joined: the first with a kind", errors.Join(errors.New("plain"), errNotFound), errs.NotFound},
	}
	for _, tt := range tests {
		if got := errs.KindOf(tt.err); got != tt.want {
			t.Errorf("%s: KindOf(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
		if tt.want != "" && !errs.Is(tt.err, tt.want) {
			t.Errorf("%s: Is(%v, %q) = false", tt.name, tt.err, tt.want)
		}
	}
	if errs.Is(nil, errs.Internal) {
		t.Error("Is(nil, Internal) = true; nil is no error of any kind")
	}
}

func TestErrorKeepsItsCauseAndReadsAsBefore(t *testing.T) {
	t.Parallel()
	cause := errors.New("driver: connection reset")
	var target typed
	for _, tt := range []struct {
		err     error
		message string
	}{
		{errs.Wrap(errs.Unavailable, cause), "driver: connection reset"},
		{&errs.Error{Kind: errs.Unavailable, Message: "store: down", Err: cause}, "store: down"},
	} {
		if tt.err.Error() != tt.message {
			t.Errorf("Error() = %q, want %q", tt.err.Error(), tt.message)
		}
		if !errors.Is(tt.err, cause) {
			t.Errorf("errors.Is(%v, cause) = false; the cause must stay wrapped", tt.err)
		}
	}
	if !errors.As(errs.Wrap(errs.Invalid, typed{wait: 3}), &target) || target.wait != 3 {
		t.Errorf("errors.As through Wrap = %+v, want the typed error", target)
	}
	if errs.Wrap(errs.Invalid, nil) != nil {
		t.Error("Wrap(kind, nil) != nil")
	}
	if s := errs.New(errs.NotFound, "x: not found"); s.Error() != "x: not found" {
		t.Errorf("New(...).Error() = %q", s.Error())
	}
}

func TestFieldsOfNamesTheRefusedFields(t *testing.T) {
	t.Parallel()
	errInvalid := errs.New(errs.Invalid, "x: invalid")
	named := &errs.Error{Kind: errs.Invalid, Fields: []errs.Field{{Name: "input", Message: "must be an object"}}, Err: errInvalid}
	if got := errs.FieldsOf(fmt.Errorf("layer: %w", named)); len(got) != 1 || got[0].Name != "input" {
		t.Errorf("FieldsOf(named) = %+v, want the input field", got)
	}
	// An outer error without fields does not hide an inner one's.
	if got := errs.FieldsOf(errs.Wrap(errs.Invalid, named)); len(got) != 1 {
		t.Errorf("FieldsOf(wrapped named) = %+v, want the inner fields", got)
	}
	if got := errs.FieldsOf(errInvalid); got != nil {
		t.Errorf("FieldsOf(sentinel) = %+v, want nil", got)
	}
	if got := errs.FieldsOf(errors.New("plain")); got != nil {
		t.Errorf("FieldsOf(plain) = %+v, want nil", got)
	}
}

// finished is a typed error that says its code and detail, and whose
// fields are its own.
type finished struct{ status string }

func (finished) Error() string         { return "finished" }
func (finished) ErrorKind() errs.Kind  { return errs.Conflict }
func (finished) ErrorCode() string     { return "run_finished" }
func (f finished) ErrorDetail() string { return "the Run finished as " + f.status }
func (finished) ErrorFields() []errs.Field {
	return []errs.Field{{Name: "status", Message: "is final"}}
}

func TestCodeAndDetailTravelOnTheError(t *testing.T) {
	t.Parallel()
	taken := &errs.Error{Kind: errs.Conflict, Code: "already_registered", Message: "x: taken", Detail: "the name is taken"}
	missing := &errs.Error{Kind: errs.NotFound, Message: "x: not found", Detail: "no such thing"}
	tests := []struct {
		name         string
		err          error
		code, detail string
	}{
		{"nil", nil, "", ""},
		{"plain", errors.New("bug"), "", ""},
		{"a sentinel without either", errs.New(errs.NotFound, "x: not found"), "", ""},
		{"a sentinel with both", fmt.Errorf("layer: %w", taken), "already_registered", "the name is taken"},
		{"a detail alone", missing, "", "no such thing"},
		{"an outer error without either does not hide the inner", errs.Wrap(errs.NotFound, missing), "", "no such thing"},
		{"the outer one's wins", &errs.Error{Kind: errs.NotFound, Detail: "outer", Err: missing}, "", "outer"},
		{"a typed error", fmt.Errorf("layer: %w", finished{"failed"}), "run_finished", "the Run finished as failed"},
		{"joined, depth first", fmt.Errorf("%w: %w", errs.New(errs.Invalid, "x"), taken), "already_registered", "the name is taken"},
	}
	for _, tt := range tests {
		if got := errs.CodeOf(tt.err); got != tt.code {
			t.Errorf("%s: CodeOf = %q, want %q", tt.name, got, tt.code)
		}
		if got := errs.DetailOf(tt.err); got != tt.detail {
			t.Errorf("%s: DetailOf = %q, want %q", tt.name, got, tt.detail)
		}
	}
	if got := errs.FieldsOf(fmt.Errorf("%w: %w", errs.New(errs.Invalid, "x"), finished{})); len(got) != 1 || got[0].Name != "status" {
		t.Errorf("FieldsOf(joined typed) = %+v, want the typed error's field", got)
	}
}

func TestKindsListsEveryKindOnce(t *testing.T) {
	t.Parallel()
	seen := map[errs.Kind]bool{}
	for _, k := range errs.Kinds() {
		if k == "" || seen[k] {
			t.Errorf("Kinds() holds %q twice or empty", k)
		}
		seen[k] = true
	}
	for _, k := range []errs.Kind{errs.Invalid, errs.NotFound, errs.Conflict, errs.KeyReused, errs.InProgress,
		errs.PreconditionFailed, errs.Unavailable, errs.Internal} {
		if !seen[k] {
			t.Errorf("Kinds() lacks %q", k)
		}
	}
}
