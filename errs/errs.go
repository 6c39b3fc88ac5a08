// Package errs is the small set of error kinds every domain package of
// searchd speaks: a saved search that is not there is [NotFound] whether
// savedsearch or admission says so, and a database that cannot answer now
// is [Unavailable] whichever store met it. An error also says what its
// user is told, when its kind alone says too little: a machine code
// ([CodeOf]: which conflict a [Conflict] is) and a detail in the user's
// words ([DetailOf]: "no such saved search in your organization"). The
// HTTP edge (package api) maps each kind to a status in one table and
// answers the code and detail the error carries, so it knows no domain
// package's sentinels; a store translates its driver's errors into kinds
// at its boundary (internal/dberr), so the edge needs no driver: every
// exported method of a domain package that runs SQL returns a transient
// database failure as an [Unavailable] wrapping the driver's error.
//
// A domain error carries its kind in one of two ways: it is, or wraps, an
// [*Error] (the domain sentinels are *Error values, so errors.Is against
// them keeps working), or it is a typed error with an ErrorKind method (a
// typed error that carries data for its caller, such as the time until a
// lease passes), and likewise its code and detail with ErrorCode and
// ErrorDetail methods. [KindOf] finds the first kind in the error's chain.
//
// The model is github.com/benbjohnson/wtf's error.go.
package errs

import (
	"errors"
	"fmt"
)

// Kind is the kind of a domain error: what a caller can do about it.
type Kind string

// The kinds. Each is a verdict a caller acts on, not a description of the
// cause: the cause stays wrapped inside the error.
const (
	// Invalid is input the domain refuses before it writes anything; the
	// same input fails again. Fields, when set, name the refused fields.
	Invalid Kind = "invalid"
	// NotFound is a resource the caller's organization does not have.
	NotFound Kind = "not_found"
	// Conflict is a request the state of a resource refuses, for good: a
	// name another resource holds, a change to a Run that finished. A
	// conflict names which it is by its code ([Error.Code]).
	Conflict Kind = "conflict"
	// KeyReused is an idempotency key already used for a different
	// request: a retry with the same key can never succeed.
	KeyReused Kind = "key_reused"
	// InProgress is a request whose key another caller holds right now: a
	// retry later is answered.
	InProgress Kind = "in_progress"
	// PreconditionFailed is a conditional change whose condition (a
	// version) no longer holds.
	PreconditionFailed Kind = "precondition_failed"
	// Unavailable is a dependency (the database) that could not be used
	// now; the same request may succeed later. The driver's error stays
	// wrapped.
	Unavailable Kind = "unavailable"
	// Internal is everything else: a bug or a failure nobody classified.
	// [KindOf] answers it for an error that carries no kind.
	Internal Kind = "internal"
)

// Kinds returns every kind, [Internal] last, so a table keyed by kind can
// be checked for a row of each.
func Kinds() []Kind {
	return []Kind{Invalid, NotFound, Conflict, KeyReused, InProgress, PreconditionFailed, Unavailable, Internal}
}

// Field names one refused field of an input and why: Name is its path in
// the input as its callers spell it ("input", "brief.query"), empty for
// the input as a whole.
type Field struct {
	Name    string
	Message string
}

// Error is a domain error of a [Kind]. Message describes it; Err, when
// set, is the cause it wraps (a driver's error, a validator's), which
// errors.Is and errors.As reach through [Error.Unwrap].
type Error struct {
	Kind Kind
	// Code, when set, is the machine code the error's users read (an
	// HTTP problem's "code"), where its kind's says too little:
	// "already_registered" for a [Conflict]. Empty: the kind's.
	Code    string
	Message string
	// Detail, when set, is what a user is told about the error, in the
	// user's words and never a cause's text. Empty: the kind's.
	Detail string
	// Fields names the refused fields of an [Invalid] error; nil when
	// the error does not say.
	Fields []Field
	Err    error
}

// New returns an error of kind k with message msg, for a package's
// sentinel: `var ErrNotFound = errs.New(errs.NotFound, "x: not found")`.
func New(k Kind, msg string) *Error { return &Error{Kind: k, Message: msg} }

// Errorf returns an error of kind k whose message is formatted; a %w verb
// wraps its operand as the cause.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Err: fmt.Errorf(format, args...)}
}

// Wrap returns err as an error of kind k, or nil when err is nil. The
// message is err's, so the error reads as before.
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

// kinded is an error that says its kind: [*Error] and the typed errors of
// the domain packages.
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

// CodeOf returns the code of the first error in err's chain that names
// one (an [*Error] with a Code, a typed error with an ErrorCode method),
// or "".
func CodeOf(err error) string { return first(err, coded.ErrorCode) }

// DetailOf returns the detail of the first error in err's chain that
// tells one (an [*Error] with a Detail, a typed error with an ErrorDetail
// method), or "".
func DetailOf(err error) string { return first(err, detailed.ErrorDetail) }

// FieldsOf returns the refused fields of the first error in err's chain
// that names any (an [*Error] with Fields, a typed error with an
// ErrorFields method), or nil.
func FieldsOf(err error) []Field { return first(err, fielded.ErrorFields) }

type (
	coded    interface{ ErrorCode() string }
	detailed interface{ ErrorDetail() string }
	fielded  interface{ ErrorFields() []Field }
)

// first returns what say answers for the first error of err's chain that
// is an S and answers something.
func first[S any, T ~string | ~[]Field](err error, say func(S) T) (t T) {
	find(err, func(e error) bool {
		if x, ok := e.(S); ok {
			t = say(x)
		}
		return len(t) > 0
	})
	return t
}

// find calls found on each error of err's tree, depth first as errors.As
// walks it, until found answers true.
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
