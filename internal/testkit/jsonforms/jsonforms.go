// Package jsonforms writes JSON values in arbitrary but equivalent forms, for
// tests that prove a hash or a parser sees through how a client spelled its
// JSON: members in any order, any white space between tokens, and each
// character of a string either as itself or escaped. It is test support,
// shared by the fuzz tests of several packages; no production code uses it.
package jsonforms

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Writer draws its choices from Rng, so a seed reproduces a form.
type Writer struct{ Rng *rand.Rand }

// Pick returns one of choices at random.
func (w Writer) Pick(choices ...string) string { return choices[w.Rng.IntN(len(choices))] }

// WS returns white space JSON allows between tokens, often none.
func (w Writer) WS() string { return w.Pick("", "", " ", "\n", "\t", "\r\n  ") }

// Value returns v in a random form. v holds what encoding/json decodes into
// an any with UseNumber: nil, bool, json.Number, string, []any and
// map[string]any; anything else panics.
func (w Writer) Value(v any) []byte {
	var b strings.Builder
	w.write(&b, v)
	return []byte(b.String())
}

func (w Writer) write(b *strings.Builder, v any) {
	b.WriteString(w.WS())
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		b.WriteString(string(x))
	case string:
		b.WriteString(w.Str(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			w.write(b, e)
		}
		b.WriteString(w.WS() + "]")
	case map[string]any:
		// Sorted first, so the shuffle alone decides the order.
		keys := SortedKeys(x)
		w.Rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(w.WS() + w.Str(k) + w.WS() + ":")
			w.write(b, x[k])
		}
		b.WriteString(w.WS() + "}")
	default:
		panic(fmt.Sprintf("jsonforms: %T", v))
	}
	b.WriteString(w.WS())
}

// Str returns s, valid UTF-8, as a JSON string, escaping each character or
// not at random where JSON allows both.
func (w Writer) Str(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		escape := w.Rng.IntN(3) == 0
		switch {
		case r == '"' || r == '\\':
			if escape {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteByte('\\')
				b.WriteRune(r)
			}
		case r < 0x20:
			short := map[rune]string{'\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}[r]
			if short == "" || escape {
				short = fmt.Sprintf(`\u%04X`, r)
			}
			b.WriteString(short)
		case r == '/' && escape:
			b.WriteString(`\/`)
		case !escape:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04X`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
