package api

import (
	"bytes"
	"encoding/json"
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

	"github.com/go-json-experiment/json/jsontext"
	"github.com/go-playground/validator/v10"
	"github.com/labstack/echo/v4"
)

// DefaultMaxBodyBytes is the default limit on a request body. The largest
// body the size limits allow is a saved search of about 1 MiB of JSON
// (savedsearch.MaxSavedSearchBytes, as searchd encodes it); 4 MiB leaves
// room for a client that escapes what searchd would not (every non-ASCII
// character as \uXXXX), and bounds what a request can make the server
// buffer.
const DefaultMaxBodyBytes = 4 << 20

// maxJSONDepth bounds how deeply a request body may nest objects and arrays.
// The bodies this API defines nest four levels; the free-form filters and
// input objects get the rest. A bound keeps a hostile body from exhausting
// PostgreSQL's stack when it parses the stored jsonb.
const maxJSONDepth = 32

// maxFieldErrors bounds the errors one validation problem lists.
const maxFieldErrors = 20

// FieldError names one refused field of a request: Field is its JSON path,
// dotted with indexes in brackets ("brief.query", "baseline.items[3]"), and
// Message says what is wrong with it.
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

// decodeBody reads the JSON body of c into dst, a pointer to a request
// struct, and validates it. With bodyOptional an empty body (no bytes, or
// only white space) leaves dst untouched, so every field takes its default.
//
// The checks run in the order a client can fix them:
//   - a Content-Type other than application/json or application/*+json
//     (charset utf-8 alone) answers 415 unsupported_media_type, as does a
//     non-empty body with no Content-Type;
//   - a body longer than the limit answers 413 payload_too_large, enforced
//     while reading, so an oversized body is never held in memory whole;
//   - a body that is not one well-formed UTF-8 JSON object answers 400
//     malformed_json;
//   - unknown or duplicate fields, a value of the wrong JSON type, nesting
//     deeper than maxJSONDepth, a NUL character in any string (PostgreSQL
//     text cannot hold it), and the struct's validate rules answer 400
//     validation_failed, listing each field.
func (s *Server) decodeBody(c echo.Context, dst any, required bodyRequired) error {
	r := c.Request()
	ct := r.Header.Get(echo.HeaderContentType)
	if ct != "" && !isJSONMediaType(ct) {
		return &apiError{status: http.StatusUnsupportedMediaType, code: CodeUnsupportedMediaType,
			detail: "the request body must be JSON: send Content-Type: application/json"}
	}
	if r.ContentLength > s.maxBodyBytes {
		return s.tooLarge()
	}
	var buf []byte
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		var err error
		buf, err = io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, s.maxBodyBytes))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return s.tooLarge()
		case err != nil:
			return &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON,
				detail: "the request body could not be read"}
		}
	}
	if len(bytes.TrimSpace(buf)) == 0 {
		if required == bodyOptional {
			return nil
		}
		return &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON,
			detail: "the request body is empty; this operation needs a JSON object"}
	}
	if ct == "" {
		return &apiError{status: http.StatusUnsupportedMediaType, code: CodeUnsupportedMediaType,
			detail: "the request has a body but no Content-Type: send Content-Type: application/json"}
	}
	buf, err := integralNumbers(buf, reflect.TypeOf(dst))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(buf, dst); err != nil {
		// A safety net: checkJSON has seen every token and type already.
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return validationFailed(FieldError{Field: typeErr.Field, Message: "is out of range"})
		}
		return &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON,
			detail: "the request body is not valid JSON"}
	}
	if !hasRules(reflect.TypeOf(dst)) {
		return nil
	}
	if err := validate.Struct(dst); err != nil {
		return validationProblem(err)
	}
	return nil
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

func (s *Server) tooLarge() error {
	return &apiError{status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge,
		detail: fmt.Sprintf("the request body is larger than %d bytes", s.maxBodyBytes)}
}

// isJSONMediaType reports whether the Content-Type value ct names JSON:
// application/json or application/<anything>+json, with no charset or
// charset utf-8 (RFC 8259 §8.1: JSON exchanged between systems is UTF-8).
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

// checkJSON walks buf, a whole request body, token by token against the Go
// type t it will be decoded into, and returns an *apiError for the first
// syntax problem or for every field problem it finds (up to
// maxFieldErrors). After it passes, json.Unmarshal into t assigns every
// field without surprises: Go's decoder alone would match field names
// case-insensitively, keep the last of duplicate names, ignore unknown ones
// on request and name a wrong-typed array element without its index.
func checkJSON(buf []byte, t reflect.Type) error {
	_, err := walkJSON(buf, t)
	return err
}

// integralNumbers is checkJSON that also returns buf with every integral
// number written in another form where the schema has an integer (10.0,
// 1e1, 1.0E+1) rewritten as the integer (10), so Go's decoder, which takes
// integers written as integers alone, reads what JSON Schema's integer
// accepts: a number whose value is integral.
func integralNumbers(buf []byte, t reflect.Type) ([]byte, error) {
	w, err := walkJSON(buf, t)
	if err != nil || len(w.rewrites) == 0 {
		return buf, err
	}
	var out []byte
	at := 0
	for _, r := range w.rewrites {
		out = append(append(out, buf[at:r.start]...), r.text...)
		at = r.end
	}
	return append(out, buf[at:]...), nil
}

func walkJSON(buf []byte, t reflect.Type) (*jsonWalker, error) {
	if !utf8.Valid(buf) {
		return nil, &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON,
			detail: "the request body is not valid UTF-8"}
	}
	dec := walkDecoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(noInput) // hold no body while pooled
		walkDecoders.Put(dec)
	}()
	// Read from a bytes.Buffer, the decoder parses buf in place.
	dec.Reset(bytes.NewBuffer(buf), walkOptions...)
	w := &jsonWalker{dec: dec}
	tok, err := w.next()
	if err != nil {
		return nil, malformed(err)
	}
	if tok.kind != '{' {
		return nil, &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON,
			detail: "the request body must be a JSON object"}
	}
	if err := w.value(tok, t, "", 1); err != nil {
		var deep *errTooDeep
		if errors.As(err, &deep) {
			return nil, validationFailed(FieldError{Field: deep.path,
				Message: fmt.Sprintf("nests objects and arrays deeper than %d levels", maxJSONDepth)})
		}
		return nil, malformed(err)
	}
	if _, err := w.dec.ReadToken(); err != io.EOF {
		return nil, &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON,
			detail: "the request body holds more than one JSON value"}
	}
	if len(w.errs) > 0 {
		return nil, validationFailed(w.errs...)
	}
	return w, nil
}

// malformed turns a decoder error into a malformed_json problem. The detail
// quotes the decoder, which describes only the client's own bytes.
func malformed(err error) error {
	detail := "the request body is not valid JSON"
	var syn *jsontext.SyntacticError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		detail += ": it ends too early"
	case errors.As(err, &syn) && syn.Err != nil:
		detail = fmt.Sprintf("%s: %s (at byte %d)", detail, syn.Err, syn.ByteOffset)
	}
	return &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON, detail: detail}
}

// errTooDeep stops a walk at the first value nested beyond maxJSONDepth.
type errTooDeep struct{ path string }

func (e *errTooDeep) Error() string { return "too deep at " + e.path }

// walkOptions are the decoder's options: duplicate names are the walker's
// to report, as field errors; an escaped lone surrogate reads as U+FFFD, as
// encoding/json reads it (raw invalid UTF-8 is refused before).
var walkOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// walkDecoders are the walker's decoders, reset for each body.
var walkDecoders = sync.Pool{New: func() any { return jsontext.NewDecoder(noInput) }}

// noInput is what a pooled decoder is reset to; it is never read.
var noInput = strings.NewReader("")

type jsonWalker struct {
	dec  *jsontext.Decoder
	errs []FieldError
	// rewrites are the integral numbers at integer fields written in a
	// form other than an integer, in the order of the body.
	rewrites []numberRewrite
}

// numberRewrite replaces buf[start:end] with text.
type numberRewrite struct {
	start, end int
	text       string
}

// token is one JSON token: its kind ('{', '}', '[', ']', '"' a string,
// '0' a number, 't', 'f', 'n' null) and, for a string, its value and, for
// a number, its text.
type token struct {
	kind jsontext.Kind
	text string
}

// next reads the next token.
func (w *jsonWalker) next() (token, error) {
	t, err := w.dec.ReadToken()
	if err != nil {
		return token{}, err
	}
	tok := token{kind: t.Kind()}
	if tok.kind == '"' || tok.kind == '0' {
		tok.text = t.String()
	}
	return tok, nil
}

// more reports whether the object or array being read has another member
// (or another token that is an error, which the next read returns).
func (w *jsonWalker) more() bool {
	k := w.dec.PeekKind()
	return k != '}' && k != ']'
}

func (w *jsonWalker) fail(path, msg string) {
	if len(w.errs) < maxFieldErrors {
		w.errs = append(w.errs, FieldError{Field: path, Message: msg})
	}
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	anyType        = reflect.TypeFor[any]()
)

// value checks the JSON value that starts with tok against type t at path.
// depth is the nesting level of the value itself (the body is 1). It returns
// an error only when the walk cannot go on; field problems are collected.
func (w *jsonWalker) value(tok token, t reflect.Type, path string, depth int) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if tok.kind == 'n' { // null: the field is absent; required rules decide
		return nil
	}
	switch {
	case t == rawMessageType || t == anyType:
		return w.free(tok, path, depth)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem() == anyType:
		if tok.kind != '{' {
			w.fail(path, "must be an object")
		}
		return w.free(tok, path, depth)
	case t.Kind() == reflect.Struct:
		if tok.kind != '{' {
			w.fail(path, "must be an object")
			return w.free(tok, path, depth)
		}
		return w.object(t, path, depth)
	case t.Kind() == reflect.Slice:
		if tok.kind != '[' {
			w.fail(path, "must be an array")
			return w.free(tok, path, depth)
		}
		if depth > maxJSONDepth {
			return &errTooDeep{path: path}
		}
		for i := 0; w.more(); i++ {
			elem, err := w.next()
			if err != nil {
				return err
			}
			if err := w.value(elem, t.Elem(), fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		_, err := w.next() // ]
		return err
	case t.Kind() == reflect.String:
		if tok.kind != '"' {
			w.fail(path, "must be a string")
			return w.free(tok, path, depth)
		}
		if strings.IndexByte(tok.text, 0) >= 0 {
			w.fail(path, "must not contain the NUL character")
		}
		return nil
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if tok.kind != '0' {
			w.fail(path, "must be an integer")
			return w.free(tok, path, depth)
		}
		n := tok.text
		i, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			var integral bool
			if i, integral = integralValue(n); !integral {
				w.fail(path, "must be an integer")
				return nil
			}
			if i == math.MinInt64 || i == math.MaxInt64 {
				w.fail(path, "must be an integer in range")
				return nil
			}
			end := int(w.dec.InputOffset())
			w.rewrites = append(w.rewrites, numberRewrite{start: end - len(n), end: end, text: strconv.FormatInt(i, 10)})
		}
		if reflect.Zero(t).OverflowInt(i) {
			w.fail(path, "must be an integer in range")
		}
		return nil
	case t.Kind() == reflect.Float64:
		if tok.kind != '0' {
			w.fail(path, "must be a number")
			return w.free(tok, path, depth)
		}
		if f, err := strconv.ParseFloat(tok.text, 64); err != nil || math.IsInf(f, 0) {
			w.fail(path, "must be a number in range")
		}
		return nil
	case t.Kind() == reflect.Bool:
		if tok.kind != 't' && tok.kind != 'f' {
			w.fail(path, "must be true or false")
			return w.free(tok, path, depth)
		}
		return nil
	}
	return w.free(tok, path, depth)
}

// object checks the members of an object decoded into struct type t; the
// opening brace is already read.
func (w *jsonWalker) object(t reflect.Type, path string, depth int) error {
	if depth > maxJSONDepth {
		return &errTooDeep{path: path}
	}
	fields := jsonFields(t)
	var seen map[string]bool
	for w.more() {
		tok, err := w.next()
		if err != nil {
			return err
		}
		key := tok.text // the decoder guarantees a string key here
		at := joinPath(path, key)
		tok, err = w.next()
		if err != nil {
			return err
		}
		f, known := fields[key]
		switch {
		case seen[key]:
			w.fail(at, "appears more than once")
		case !known:
			w.fail(at, "is not a known field")
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[key] = true
		if !known {
			f = anyType
		}
		if err := w.value(tok, f, at, depth+1); err != nil {
			return err
		}
	}
	_, err := w.next() // }
	return err
}

// free checks a free-form value that starts with tok: any JSON at all, but
// no NUL in strings or keys, no duplicate keys and no nesting beyond
// maxJSONDepth.
func (w *jsonWalker) free(tok token, path string, depth int) error {
	switch tok.kind {
	case '"':
		if strings.IndexByte(tok.text, 0) >= 0 {
			w.fail(path, "must not contain the NUL character")
		}
		return nil
	case '0':
		// JSON leaves the range open; beyond float64 most readers of the
		// stored value could not hold it (RFC 8259 §6).
		if _, err := strconv.ParseFloat(tok.text, 64); err != nil {
			w.fail(path, "is a number out of range")
		}
		return nil
	case '{', '[':
		if depth > maxJSONDepth {
			return &errTooDeep{path: path}
		}
		var seen map[string]bool
		for i := 0; w.more(); i++ {
			var at string
			if tok.kind == '{' {
				name, err := w.next()
				if err != nil {
					return err
				}
				key := name.text
				at = joinPath(path, key)
				if seen == nil {
					seen = map[string]bool{}
				}
				if strings.IndexByte(key, 0) >= 0 {
					w.fail(at, "must not contain the NUL character in its name")
				} else if seen[key] {
					w.fail(at, "appears more than once")
				}
				seen[key] = true
			} else {
				at = fmt.Sprintf("%s[%d]", path, i)
			}
			next, err := w.next()
			if err != nil {
				return err
			}
			if err := w.free(next, at, depth+1); err != nil {
				return err
			}
		}
		_, err := w.next() // closing delimiter
		return err
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldCache maps a struct type to its JSON member names and their types.
var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		if name := jsonName(f); name != "" && f.IsExported() {
			m[name] = f.Type
		}
	}
	fieldCache.Store(t, m)
	return m
}

// jsonName returns the JSON member name of a struct field, or "" when the
// field is not serialized.
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

// validate holds the rules of the request structs. Field names in its
// errors are the JSON names.
var validate = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(jsonName)
	return v
}()

// validationFailedDetail is the detail of every validation_failed problem;
// its errors member says the rest.
const validationFailedDetail = "the request has invalid fields; see errors"

func validationFailed(fields ...FieldError) error {
	return &apiError{status: http.StatusBadRequest, code: CodeValidationFailed,
		detail: validationFailedDetail, fields: fields}
}

// validationProblem turns validator errors into a validation_failed problem.
func validationProblem(err error) error {
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		// InvalidValidationError: a handler passed a non-struct. A bug,
		// and a 500 is its honest answer.
		return err
	}
	fields := make([]FieldError, 0, min(len(verrs), maxFieldErrors))
	for _, fe := range verrs[:min(len(verrs), maxFieldErrors)] {
		// The namespace starts with the Go name of the request struct.
		_, path, _ := strings.Cut(fe.Namespace(), ".")
		fields = append(fields, FieldError{Field: path, Message: ruleMessage(fe)})
	}
	return validationFailed(fields...)
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

// integralValue reads a JSON number literal that is not written as an
// integer (a fraction, an exponent or both) and reports whether its value
// is an integer, as JSON Schema's integer type asks: 10.0 and 1e1 are 10.
// The digits are shifted by the exponent as text, so the answer is exact
// and costs nothing for a huge exponent. A value beyond int64 answers
// math.MaxInt64 or math.MinInt64 with true, which every caller refuses as
// out of range.
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
