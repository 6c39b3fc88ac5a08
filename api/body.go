package api

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/go-playground/validator/v10"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/savedsearch"
)

// DefaultMaxBodyBytes is the default request body limit: room for a
// maximal saved search (about 1 MiB) even with every character escaped.
const DefaultMaxBodyBytes = 4 << 20

// maxJSONDepth bounds a request body's nesting, so a hostile body cannot
// exhaust PostgreSQL's stack when it parses the stored jsonb.
const maxJSONDepth = 32

// maxFieldErrors bounds the errors one validation problem lists.
const maxFieldErrors = 20

// FieldError is one refused request field; Field is its JSON path
// ("baseline.items[3]").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// bodyRequired says whether a handler accepts an empty body.
type bodyRequired bool

const (
	bodyMandatory bodyRequired = true
	bodyOptional  bodyRequired = false
)

// decodeBody decodes and validates c's JSON body into a T. With
// bodyOptional an empty body is T's zero value. A body over the limit was
// refused by admit, which read it. Refusals, in the order a client can
// fix them: 415 for a non-JSON or missing Content-Type; 400
// malformed_json; 400 validation_failed for the first unknown, duplicate,
// mistyped, too deep or NUL-holding field; then 400 validation_failed
// listing rule failures.
func decodeBody[T any](c echo.Context, required bodyRequired) (dst T, err error) {
	r := c.Request()
	ct := r.Header.Get(echo.HeaderContentType)
	if ct != "" && !isJSONMediaType(ct) {
		return dst, &apiError{status: http.StatusUnsupportedMediaType, code: CodeUnsupportedMediaType,
			detail: "the request body must be JSON: send Content-Type: application/json"}
	}
	var buf []byte
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if buf, err = io.ReadAll(r.Body); err != nil {
			return dst, malformedJSON("the request body could not be read")
		}
	}
	if len(bytes.TrimSpace(buf)) == 0 {
		if required == bodyOptional {
			return dst, nil
		}
		return dst, malformedJSON("the request body is empty; this operation needs a JSON object")
	}
	if ct == "" {
		return dst, &apiError{status: http.StatusUnsupportedMediaType, code: CodeUnsupportedMediaType,
			detail: "the request has a body but no Content-Type: send Content-Type: application/json"}
	}
	if err := decodeJSON(buf, &dst); err != nil {
		return dst, err
	}
	if !hasRules(reflect.TypeOf(&dst)) {
		return dst, nil
	}
	if err := validate.Struct(&dst); err != nil {
		return dst, validationProblem(err)
	}
	return dst, nil
}

// rulesCache maps a type to whether validate has a rule anywhere in it.
var rulesCache sync.Map // reflect.Type → bool

// hasRules reports whether type t holds a validate tag anywhere, in its
// fields or in the types they hold: a struct without one (a saved-search
// start's options) needs no walk by the validator, which finds nothing.
// validate has no struct-level or custom rules, so the tags are all.
func hasRules(t reflect.Type) bool {
	if v, ok := rulesCache.Load(t); ok {
		return v.(bool)
	}
	has := typeHasRules(t, map[reflect.Type]bool{})
	rulesCache.Store(t, has)
	return has
}

func typeHasRules(t reflect.Type, seen map[reflect.Type]bool) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		if t.Kind() == reflect.Map && typeHasRules(t.Key(), seen) {
			return true
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return false
	}
	seen[t] = true
	for f := range t.Fields() {
		if tag, ok := f.Tag.Lookup("validate"); ok && tag != "" && tag != "-" {
			return true
		}
		if typeHasRules(f.Type, seen) {
			return true
		}
	}
	return false
}

// malformedJSON is the 400 malformed_json problem saying detail.
func malformedJSON(detail string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON, detail: detail}
}

// tooLarge is the 413 of a body (what: "request", "callback").
func tooLarge(what string, limit int64) error {
	return &apiError{status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge,
		detail: fmt.Sprintf("the %s body is larger than %d bytes", what, limit)}
}

// isJSONMediaType reports whether ct is application/json or
// application/*+json, with no charset or utf-8 (RFC 8259 §8.1).
func isJSONMediaType(ct string) bool {
	if ct == echo.MIMEApplicationJSON { // what nearly every client sends
		return true
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	if mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

// decodeJSON decodes a whole body into dst. It returns malformed_json for
// anything but one UTF-8 JSON object, else validation_failed naming the
// first refused field.
func decodeJSON(buf []byte, dst any) error {
	if !utf8.Valid(buf) {
		return malformedJSON("the request body is not valid UTF-8")
	}
	var err error = errNotObject // JSON v2 reads null into a struct
	if body := bytes.TrimLeft(buf, " \t\r\n"); len(body) > 0 && body[0] == '{' {
		if err = json.Unmarshal(buf, dst, bodyOptions); err == nil {
			return nil
		}
	}
	// A syntax error anywhere is the client's to fix first.
	if bad := syntaxProblem(buf); bad != nil {
		return bad
	}
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	var free *freeProblem
	var r valueRefusal
	switch {
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		return fieldRefused(buf, syn.JSONPointer, refusedDuplicate)
	case !errors.As(err, &sem):
		return malformed(err) // a safety net: decoding returns no other error
	case errors.As(sem.Err, &free):
		return fieldRefused(buf, sem.JSONPointer+free.at, free.valueRefusal)
	case errors.Is(sem.Err, json.ErrUnknownName):
		return fieldRefused(buf, sem.JSONPointer, refusedUnknown)
	case errors.As(sem.Err, &r):
		return fieldRefused(buf, sem.JSONPointer, r)
	}
	return fieldRefused(buf, sem.JSONPointer, typeRefusal(sem))
}

// bodyOptions match names exactly, refuse unknown and duplicate names,
// read escaped lone surrogates as U+FFFD like encoding/json, and hook the
// checks JSON v2 lacks. A type with its own UnmarshalJSON bypasses them
// and needs a hook, as the brief has.
var bodyOptions = json.JoinOptions(
	json.RejectUnknownMembers(true),
	jsontext.AllowInvalidUTF8(true),
	json.WithUnmarshalers(json.JoinUnmarshalers(
		json.UnmarshalFromFunc(noNUL),
		json.UnmarshalFromFunc(integer[int]),
		json.UnmarshalFromFunc(integer[int8]),
		json.UnmarshalFromFunc(integer[int16]),
		json.UnmarshalFromFunc(integer[int32]),
		json.UnmarshalFromFunc(integer[int64]),
		json.UnmarshalFromFunc(freeAny),
		json.UnmarshalFromFunc(freeRaw),
		json.UnmarshalFromFunc(strictBrief),
	)),
)

// valueRefusal is what a hook or JSON v2 says of a value it refuses.
type valueRefusal string

func (r valueRefusal) Error() string { return string(r) }

const (
	refusedNUL       valueRefusal = "must not contain the NUL character"
	refusedNULName   valueRefusal = "must not contain the NUL character in its name"
	refusedFraction  valueRefusal = "must be an integer"
	refusedIntRange  valueRefusal = "must be an integer in range"
	refusedNumber    valueRefusal = "is a number out of range"
	refusedUnknown   valueRefusal = "is not a known field"
	refusedDuplicate valueRefusal = "appears more than once"
	refusedInvalid   valueRefusal = "is invalid"
)

var refusedDepth = valueRefusal(fmt.Sprintf("nests objects and arrays deeper than %d levels", maxJSONDepth))

var errNotObject = malformedJSON("the request body must be a JSON object")

// noNUL refuses strings and names holding NUL, which PostgreSQL text
// cannot store.
func noNUL(dec *jsontext.Decoder, s *string) error {
	if dec.PeekKind() != '"' {
		return errors.ErrUnsupported // JSON v2 refuses or zeroes it
	}
	kind, n := dec.StackIndex(dec.StackDepth())
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if *s = tok.String(); strings.IndexByte(*s, 0) < 0 {
		return nil
	} else if kind == '{' && n%2 == 0 {
		return refusedNULName
	}
	return refusedNUL
}

// integer accepts any integral number (10, 10.0, 1e1) as JSON Schema's
// integer does; JSON v2 alone accepts only 10.
func integer[T int | int8 | int16 | int32 | int64](dec *jsontext.Decoder, v *T) error {
	if dec.PeekKind() != '0' {
		return errors.ErrUnsupported // JSON v2 refuses or zeroes it
	}
	lit, err := dec.ReadValue()
	if err != nil {
		return err
	}
	i, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		var integral bool
		if i, integral = integralValue(string(lit)); !integral {
			return refusedFraction
		}
		if i == math.MinInt64 || i == math.MaxInt64 {
			return refusedIntRange
		}
	}
	if int64(T(i)) != i {
		return refusedIntRange
	}
	*v = T(i)
	return nil
}

// freeAny reads a free-form value with numbers as json.Number.
func freeAny(dec *jsontext.Decoder, v *any) error {
	val, err := readFree(dec)
	if err != nil {
		return err
	}
	return json.Unmarshal(val, v, anyNumbers)
}

// anyNumbers decodes the numbers of an any as json.Number.
var anyNumbers = json.JoinOptions(jsontext.AllowInvalidUTF8(true), json.WithUnmarshalers(
	json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *any) error {
		if dec.PeekKind() != '0' {
			return errors.ErrUnsupported
		}
		lit, err := dec.ReadValue()
		*v = stdjson.Number(lit)
		return err
	})))

// freeRaw reads a free-form value into m as the client wrote it.
func freeRaw(dec *jsontext.Decoder, m *stdjson.RawMessage) error {
	val, err := readFree(dec)
	if err == nil {
		*m = append((*m)[:0], val...)
	}
	return err
}

// plainBrief drops the brief's lenient UnmarshalJSON, meant for rows.
type plainBrief savedsearch.Brief

// strictBrief reads a brief with the options of the body it is in.
func strictBrief(dec *jsontext.Decoder, b *savedsearch.Brief) error {
	return json.UnmarshalDecode(dec, (*plainBrief)(b))
}

// readFree reads a free-form value (a Run's input, a filter) and refuses,
// with a *freeProblem, NUL characters, numbers beyond float64 (RFC 8259
// §6) and nesting deeper than maxJSONDepth.
func readFree(dec *jsontext.Decoder) (jsontext.Value, error) {
	depth := dec.StackDepth() // of the value's container
	val, err := dec.ReadValue()
	if err != nil || val.Kind() == 'n' {
		return val, err
	}
	walk := walkers.Get().(*jsontext.Decoder)
	defer walkers.Put(walk)
	// Read from a bytes.Buffer, the decoder parses val in place.
	walk.Reset(bytes.NewBuffer(val), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	defer walk.Reset(noInput) // hold no body while pooled
	for {
		tok, err := walk.ReadToken()
		if err != nil {
			return val, nil // io.EOF: the end of val
		}
		var r valueRefusal
		switch tok.Kind() {
		case '{', '[':
			if depth+walk.StackDepth() > maxJSONDepth {
				r = refusedDepth
			}
		case '"':
			if strings.IndexByte(tok.String(), 0) >= 0 {
				r = refusedNUL
				if kind, n := walk.StackIndex(walk.StackDepth()); kind == '{' && n%2 == 1 {
					r = refusedNULName
				}
			}
		case '0':
			if _, err := strconv.ParseFloat(tok.String(), 64); err != nil {
				r = refusedNumber
			}
		}
		if r != "" {
			return nil, &freeProblem{at: walk.StackPointer(), valueRefusal: r}
		}
	}
}

// freeProblem is a refusal inside a free-form value, at pointer at.
type freeProblem struct {
	at jsontext.Pointer
	valueRefusal
}

// walkers are the decoders of readFree, reset for each value.
var walkers = sync.Pool{New: func() any { return jsontext.NewDecoder(noInput) }}

// noInput is what a pooled decoder is reset to; it is never read.
var noInput = strings.NewReader("")

// syntaxProblem returns buf's malformed_json problem, or nil for one JSON
// object (duplicate names are field problems).
func syntaxProblem(buf []byte) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(buf), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	val, err := dec.ReadValue()
	switch {
	case err != nil:
		return malformed(err)
	case val.Kind() != '{':
		return errNotObject
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return malformedJSON("the request body holds more than one JSON value")
	}
	return nil
}

// malformed turns a decoder error, which quotes only the client's bytes,
// into a malformed_json problem.
func malformed(err error) error {
	detail := "the request body is not valid JSON"
	var syn *jsontext.SyntacticError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		detail += ": it ends too early"
	case errors.As(err, &syn) && syn.Err != nil:
		detail = fmt.Sprintf("%s: %s (at byte %d)", detail, syn.Err, syn.ByteOffset)
	}
	return malformedJSON(detail)
}

// fieldRefused is the validation_failed problem of the field at JSON
// Pointer ptr in buf, named "baseline.items[3]"-style; re-reading buf tells
// indexes from names.
func fieldRefused(buf []byte, ptr jsontext.Pointer, r valueRefusal) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(buf), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	n := strings.Count(string(ptr), "/")
	for dec.StackDepth() < n || dec.StackPointer() != ptr.Parent() {
		if _, err := dec.ReadToken(); err != nil {
			break // not met: name every token
		}
	}
	var path strings.Builder
	level := 0
	for tok := range ptr.Tokens() {
		if level++; level <= dec.StackDepth() {
			if kind, _ := dec.StackIndex(level); kind == '[' {
				path.WriteString("[" + tok + "]")
				continue
			}
		}
		if path.Len() > 0 {
			path.WriteByte('.')
		}
		path.WriteString(tok)
	}
	return validationFailed(FieldError{Field: path.String(), Message: string(r)})
}

// typeRefusal says why JSON v2 refused a value: its type or range, or
// just "invalid" when a method such as UnmarshalText refused it.
func typeRefusal(sem *json.SemanticError) valueRefusal {
	t := sem.GoType
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var r valueRefusal
	if t != nil {
		r = kindRefusals[t.Kind()]
	}
	switch {
	case r == "" || sem.Err != nil && !errors.Is(sem.Err, strconv.ErrSyntax) && !errors.Is(sem.Err, strconv.ErrRange):
		return refusedInvalid
	case errors.Is(sem.Err, strconv.ErrRange):
		return r + " in range"
	}
	return r
}

// kindRefusals say what JSON a Go kind takes.
var kindRefusals = map[reflect.Kind]valueRefusal{
	reflect.Struct: "must be an object", reflect.Map: "must be an object",
	reflect.Slice: "must be an array", reflect.Array: "must be an array",
	reflect.String: "must be a string", reflect.Bool: "must be true or false",
	reflect.Int: "must be an integer", reflect.Int8: "must be an integer", reflect.Int16: "must be an integer",
	reflect.Int32: "must be an integer", reflect.Int64: "must be an integer",
	reflect.Uint: "must be an integer", reflect.Uint8: "must be an integer", reflect.Uint16: "must be an integer",
	reflect.Uint32: "must be an integer", reflect.Uint64: "must be an integer",
	reflect.Float32: "must be a number", reflect.Float64: "must be a number",
}

// jsonName returns a field's JSON name, or "" when not serialized.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}

// validate checks request structs, reporting JSON field names.
var validate = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(jsonName)
	return v
}()

const validationFailedDetail = "the request has invalid fields; see errors"

func validationFailed(fields ...FieldError) error {
	return &apiError{status: http.StatusBadRequest, code: CodeValidationFailed,
		detail: validationFailedDetail, fields: fields}
}

// validationProblem turns validator errors into a validation_failed problem.
func validationProblem(err error) error {
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		// InvalidValidationError: a handler bug, so a 500.
		return err
	}
	return validationFailed(ruleFields(verrs, func(path string) string { return path })...)
}

// ruleFields lists up to maxFieldErrors fields of verrs and their rules.
func ruleFields(verrs validator.ValidationErrors, name func(path string) string) []FieldError {
	fields := make([]FieldError, 0, min(len(verrs), maxFieldErrors))
	for _, fe := range verrs[:min(len(verrs), maxFieldErrors)] {
		// The namespace starts with the Go name of the request struct.
		_, path, _ := strings.Cut(fe.Namespace(), ".")
		fields = append(fields, FieldError{Field: name(path), Message: ruleMessage(fe)})
	}
	return fields
}

// ruleMessage says in words which validate rule a field broke.
func ruleMessage(fe validator.FieldError) string {
	kind := fe.Kind()
	unit := ""
	switch kind {
	case reflect.String:
		unit = " characters"
	case reflect.Slice, reflect.Map:
		unit = " items"
	}
	switch fe.Tag() {
	case "required":
		return "is required"
	case "min":
		return "must be at least " + fe.Param() + plural(unit, fe.Param())
	case "max":
		return "must be at most " + fe.Param() + plural(unit, fe.Param())
	case "oneof":
		return "must be one of: " + strings.Join(strings.Fields(fe.Param()), ", ")
	}
	return "is invalid"
}

// plural drops the s of unit for a count of one.
func plural(unit, count string) string {
	if count == "1" {
		return strings.TrimSuffix(unit, "s")
	}
	return unit
}

// integralValue reports whether a number literal with a fraction or
// exponent is an integer (10.0, 1e1), shifting digits as text so the
// answer is exact for any exponent. Beyond int64 it returns MaxInt64 or
// MinInt64 with true, which callers refuse as out of range.
func integralValue(lit string) (int64, bool) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(lit), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expPart, "+"))
		if err != nil {
			e = math.MaxInt32 // beyond any range; its sign decides below
			if strings.HasPrefix(expPart, "-") {
				e = math.MinInt32
			}
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	point := len(intPart) + exp - (len(intPart+frac) - len(digits)) // digits before the point
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return 0, true
	}
	if point < len(digits) {
		return 0, false // a non-zero digit after the point
	}
	if point > 19 {
		if neg {
			return math.MinInt64, true
		}
		return math.MaxInt64, true
	}
	v := digits + strings.Repeat("0", point-len(digits))
	if neg {
		v = "-" + v
	}
	i, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		if neg {
			return math.MinInt64, true
		}
		return math.MaxInt64, true
	}
	return i, true
}

// errBodyNotTaken is the 413 of a route that takes no body, sent one.
var errBodyNotTaken = &apiError{status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge,
	detail: "this route takes no request body: send none (no Content-Length above 0, no Transfer-Encoding)"}

// noBody refuses, with 413, any request on a bodiless route that
// declares a body.
func noBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if r := c.Request(); r.ContentLength != 0 {
			return errBodyNotTaken
		}
		return next(c)
	}
}
