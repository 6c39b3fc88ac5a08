// Package jsonforms writes JSON values in random equivalent forms (member
// order, white space, escapes), for fuzz tests that check a hash or parser
// ignores spelling. Test support only.
package jsonforms

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Writer draws its choices from Rng, so a seed reproduces a form.
type Writer struct{ Rng *rand.Rand }

// Pick returns one of choices at random.
func (w Writer) Pick(choices ...string) string { return choices[w.Rng.IntN(len(choices))] }

// WS returns white space JSON allows between tokens, often none.
func (w Writer) WS() string { return w.Pick("", "", " ", "\n", "\t", "\r\n  ") }

// Value returns v in a random form. v holds a UseNumber decoding (nil,
// bool, json.Number, string, []any, map[string]any); anything else panics.
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
		// Sort first so the shuffle alone decides the order.
		keys := slices.Sorted(maps.Keys(x))
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

// Str returns s (valid UTF-8) as a JSON string, escaping characters at
// random where JSON allows.
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
