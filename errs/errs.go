// Package errs holds the error kinds every domain package returns, so the
// HTTP edge maps kinds to statuses in one table without knowing any
// package's sentinels or the database driver. An error carries its kind
// either as an [*Error] (domain sentinels are *Error values, so errors.Is
// keeps working) or as a typed error with an ErrorKind method; it may also
// carry a machine code ([CodeOf]) and a user-facing detail ([DetailOf]).
// Stores return transient database failures as [Unavailable] (see
// internal/dberr). Modelled on github.com/benbjohnson/wtf's error.go.
package errs

import "errors"

// Kind is the kind of a domain error: what a caller can do about it.
type Kind string

// The kinds: each says what a caller can do, not what the cause was.
const (
	// Invalid is refused input; retrying the same input fails again.
	Invalid Kind = "invalid"
	// NotFound is a resource the caller's organization does not have.
	NotFound Kind = "not_found"
	// Conflict is a request the resource's state refuses for good (a
	// taken name, a finished Run); its code says which.
	Conflict Kind = "conflict"
	// KeyReused is an idempotency key already used for another request.
	KeyReused Kind = "key_reused"
	// InProgress is a key another caller holds now; retry later.
	InProgress Kind = "in_progress"
	// PreconditionFailed is a conditional change whose version no longer holds.
	PreconditionFailed Kind = "precondition_failed"
	// Unavailable is a dependency (the database) failing now; a retry may succeed.
	Unavailable Kind = "unavailable"
	// Internal is everything unclassified; [KindOf] returns it for an
	// error without a kind.
	Internal Kind = "internal"
)

// Kinds returns every kind, [Internal] last.
func Kinds() []Kind {
	return []Kind{Invalid, NotFound, Conflict, KeyReused, InProgress, PreconditionFailed, Unavailable, Internal}
}

// Field is one refused input field: Name is its path ("brief.query"),
// empty for the whole input.
type Field struct {
	Name    string
	Message string
}

// Error is a domain error of a [Kind], optionally wrapping a cause Err.
type Error struct {
	Kind Kind
	// Code is the machine code shown to users ("already_registered");
	// empty means the kind's.
	Code    string
	Message string
	// Detail is the user-facing text, never the cause's; empty means the kind's.
	Detail string
	// Fields lists the refused fields of an [Invalid] error.
	Fields []Field
	Err    error
}

// New returns an error of kind k with message msg, for sentinels.
func New(k Kind, msg string) *Error { return &Error{Kind: k, Message: msg} }

// Wrap returns err as an error of kind k, or nil when err is nil.
func Wrap(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: k, Err: err}
}

// Error returns the message, with the cause's when it has no message of
// its own.
func (e *Error) Error() string {
	if e.Message == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorKind returns e's kind; it is the method [KindOf] looks for.
func (e *Error) ErrorKind() Kind { return e.Kind }

// ErrorCode returns e's code; it is the method [CodeOf] looks for.
func (e *Error) ErrorCode() string { return e.Code }

// ErrorDetail returns e's detail; it is the method [DetailOf] looks for.
func (e *Error) ErrorDetail() string { return e.Detail }

// ErrorFields returns e's fields; it is the method [FieldsOf] looks for.
func (e *Error) ErrorFields() []Field { return e.Fields }

type kinded interface {
	error
	ErrorKind() Kind
}

// KindOf returns the kind of the first error in err's chain that has one,
// [Internal] when none has, and "" for a nil err.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var k kinded
	if errors.As(err, &k) {
		if kind := k.ErrorKind(); kind != "" {
			return kind
		}
	}
	return Internal
}

// Is reports whether err is of kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// CodeOf returns the first non-empty ErrorCode in err's chain, or "".
func CodeOf(err error) string { return first(err, coded.ErrorCode) }

// DetailOf returns the first non-empty ErrorDetail in err's chain, or "".
func DetailOf(err error) string { return first(err, detailed.ErrorDetail) }

// FieldsOf returns the first non-empty ErrorFields in err's chain, or nil.
func FieldsOf(err error) []Field { return first(err, fielded.ErrorFields) }

type (
	coded    interface{ ErrorCode() string }
	detailed interface{ ErrorDetail() string }
	fielded  interface{ ErrorFields() []Field }
)

// first returns the first non-empty say(e) for e of type S in err's tree.
func first[S any, T ~string | ~[]Field](err error, say func(S) T) (t T) {
	find(err, func(e error) bool {
		if x, ok := e.(S); ok {
			t = say(x)
		}
		return len(t) > 0
	})
	return t
}

// find walks err's tree depth first, as errors.As does, until found is true.
func find(err error, found func(error) bool) bool {
	for err != nil {
		if found(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if find(e, found) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
