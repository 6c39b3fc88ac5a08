package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/canonjson"
	"github.com/searchd/searchd/internal/testkit/jsonforms"
)

// FuzzSavedSearchRequestHash checks the two promises of the saved-search
// request hash on arbitrary options: a request written differently (key
// order, white space, escapes, a field omitted or null where it equals its
// default) decodes to options that hash the same, and a request that
// differs in any option after normalization, or in the saved search,
// hashes differently. The API's own decoding is fuzzed the same way in
// api/fuzz_hash_test.go; this target is the fast one, on the hash alone.
func FuzzSavedSearchRequestHash(f *testing.F) {
	for _, s := range []struct {
		max  int
		note string
	}{
		{0, ""}, {100, ""}, {1, "n"}, {1000, strings.Repeat("é", 500)}, {99, "a\"b\\c/d<e>&\u2028\U0001F600"},
		{-1, "\x00"}, {101, "\xff"}, {0, "line\nbreak\ttab"},
	} {
		f.Add([]byte("saved search"), s.max, s.note, uint64(1))
	}
	f.Fuzz(func(t *testing.T, idSeed []byte, maxResults int, note string, style uint64) {
		// Strings reach the hash through JSON, which holds only UTF-8.
		note = strings.ToValidUTF8(note, "\uFFFD")
		id := uuid.NewSHA1(uuid.NameSpaceOID, idSeed)
		o := StartOptions{MaxResults: maxResults, Note: note}
		want := SavedSearchRequestHash(id, o)
		if got := SavedSearchRequestHash(id, o.Normalize()); got != want {
			t.Fatalf("hash of %+v = %s, of its normalized form %s", o, want, got)
		}
		w := jsonWriter{jsonforms.Writer{Rng: rand.New(rand.NewPCG(style, 7))}}
		for _, form := range w.optionForms(o) {
			var got StartOptions
			if len(form) > 0 {
				if err := json.Unmarshal(form, &got); err != nil {
					t.Fatalf("decoding %s: %v", form, err)
				}
			}
			if h := SavedSearchRequestHash(id, got); h != want {
				t.Fatalf("%+v written as %s decodes to %+v, hash %s; want %s", o, form, got, h, want)
			}
		}
		n := o.Normalize()
		for _, m := range []StartOptions{
			{MaxResults: n.MaxResults + 1, Note: note},
			{MaxResults: n.MaxResults, Note: note + "x"},
			{MaxResults: n.MaxResults, Note: "x" + note},
			{MaxResults: n.MaxResults, Note: strings.ToUpper(note)},
			{MaxResults: n.MaxResults, Note: note[:len(note)/2]},
		} {
			m.Note = strings.ToValidUTF8(m.Note, "\uFFFD")
			if m.Normalize() == n {
				continue // the mutation changed nothing (an empty or upper-case note)
			}
			if h := SavedSearchRequestHash(id, m); h == want {
				t.Fatalf("%+v and %+v differ but hash the same %s", o, m, h)
			}
		}
		if h := SavedSearchRequestHash(uuid.NewSHA1(uuid.NameSpaceOID, append(idSeed, 0)), o); h == want {
			t.Fatalf("the same options on another saved search hash the same %s", h)
		}
	})
}

// optionForms returns bodies that all say o: the plain encoding, the
// members reversed with white space, every string escaped, and, where a
// field equals its default, the body without it or with it null.
func (w jsonWriter) optionForms(o StartOptions) [][]byte {
	n := o.Normalize()
	var forms [][]byte
	plain, _ := json.Marshal(o)
	forms = append(forms, plain)
	for range 3 {
		members := []string{
			w.WS() + w.Str("max_results") + w.WS() + ":" + w.WS() + strconv.Itoa(o.MaxResults) + w.WS(),
			w.WS() + w.Str("note") + w.WS() + ":" + w.WS() + w.Str(o.Note) + w.WS(),
		}
		if n.MaxResults == DefaultMaxResults {
			members[0] = w.Pick(members[0], "", `"max_results":null`)
		}
		if o.Note == "" {
			members[1] = w.Pick(members[1], "", w.WS()+`"note"`+w.WS()+":"+w.WS()+"null")
		}
		w.Rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		members = slices.DeleteFunc(members, func(m string) bool { return m == "" })
		forms = append(forms, []byte(w.WS()+"{"+strings.Join(members, ",")+"}"+w.WS()))
	}
	if n == (StartOptions{}).Normalize() {
		forms = append(forms, nil, []byte(`{}`))
	}
	return forms
}

// FuzzDirectRequestHash checks the direct-start request hash on arbitrary
// input bytes. The input is refused exactly when it is not empty, null or
// one JSON object. An accepted input written differently (members in any
// order, any white space, any escaping of the same characters) hashes the
// same; one that differs in a value, a member, the kind or the name hashes
// differently, and so does a number written in another form (1 and 1.0,
// 1e2 and 1E2): canonjson keeps numbers as written, so that two large
// integers a float64 cannot tell apart never merge.
func FuzzDirectRequestHash(f *testing.F) {
	for _, in := range []string{
		``, `null`, `{}`, ` {} `, `{"a":1,"b":{"c":[1,2],"d":"x"}}`, `{"n":[0,-0,1.0,1e2,1E-2,12345678901234567890]}`,
		`{"s":"\u00e9\ud83d\ude00<&>\/\"\\\b\f\n\r\t"}`, `{"a":{"a":{"a":{"a":[[[[null,true,false]]]]}}}}`,
		`{"a":1,"a":2}`, `[]`, `"x"`, `1`, `{`, `{"a":1} {}`, "{\"\xff\":\"\xfe\"}", `{"":""}`,
	} {
		f.Add("capability", "n", []byte(in), uint64(1))
	}
	f.Add("definition", "\u00e9", []byte(`{"k":"v"}`), uint64(2))
	f.Fuzz(func(t *testing.T, kind, name string, input []byte, style uint64) {
		want, err := DirectRequestHash(kind, name, input)
		trimmed := bytes.TrimSpace(input)
		acceptable := len(input) == 0 || json.Valid(input) && (string(trimmed) == "null" || trimmed[0] == '{')
		switch {
		case err != nil && !errors.Is(err, ErrInvalid):
			t.Fatalf("DirectRequestHash(%q) = %v, want an error wrapping ErrInvalid", input, err)
		case (err == nil) != acceptable:
			t.Fatalf("DirectRequestHash(%q) error = %v; want an error %v", input, err, !acceptable)
		case err != nil:
			return
		}
		var v any = map[string]any{}
		if len(input) > 0 {
			dec := json.NewDecoder(bytes.NewReader(input))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if v == nil {
				v = map[string]any{}
			}
		}
		hash := func(in []byte) string {
			t.Helper()
			h, err := DirectRequestHash(kind, name, in)
			if err != nil {
				t.Fatalf("DirectRequestHash(%s): %v", in, err)
			}
			return h
		}
		w := jsonWriter{jsonforms.Writer{Rng: rand.New(rand.NewPCG(style, 11))}}
		for range 4 {
			if form := w.Value(v); hash(form) != want {
				t.Fatalf("input %q written as %s hashes %s, want %s", input, form, hash(form), want)
			}
		}
		if len(v.(map[string]any)) == 0 {
			for _, form := range []string{``, `null`, `{}`, " {\n} "} {
				if hash([]byte(form)) != want {
					t.Fatalf("empty input %q and %q hash differently", input, form)
				}
			}
		}

		differ := func(what string, h string) {
			t.Helper()
			if h == want {
				t.Fatalf("input %q and its %s hash the same %s", input, what, h)
			}
		}
		differ("kind changed", must(DirectRequestHash(kind+"!", name, input)))
		differ("name changed", must(DirectRequestHash(kind, name+"!", input)))
		obj := v.(map[string]any)
		key := "~"
		for _, ok := obj[key]; ok; _, ok = obj[key] {
			key += "~"
		}
		differ("extra member", hash(w.Value(jsonforms.With(obj, key, json.Number("0")))))
		if len(obj) > 0 {
			keys := slices.Sorted(maps.Keys(obj))
			differ("first member removed", hash(w.Value(jsonforms.Without(obj, keys[0]))))
		}
		if m, ok := jsonforms.MutateFirst(v, jsonforms.NumberLeaf); ok {
			differ("first number written in another form", hash(w.Value(m)))
		}
		if m, ok := jsonforms.MutateFirst(v, jsonforms.StringLeaf); ok {
			differ("first string changed", hash(w.Value(m)))
		}
	})
}

func must(h string, err error) string {
	if err != nil {
		panic(err)
	}
	return h
}

// jsonWriter writes JSON values in arbitrary but equivalent forms (see
// package jsonforms), with this file's forms of whole requests beside.
type jsonWriter struct{ jsonforms.Writer }

// TestDirectRequestHashNumberPolicy pins the number policy the fuzz target
// relies on: numbers are kept as written, so equal values in different
// forms are different requests, while white space around them is not.
func TestDirectRequestHashNumberPolicy(t *testing.T) {
	t.Parallel()
	h := func(in string) string { return must(DirectRequestHash("capability", "n", json.RawMessage(in))) }
	for _, pair := range [][2]string{
		{`{"n":1}`, `{"n":1.0}`}, {`{"n":100}`, `{"n":1e2}`}, {`{"n":1e2}`, `{"n":1E2}`}, {`{"n":0}`, `{"n":-0}`},
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`},
	} {
		if h(pair[0]) == h(pair[1]) {
			t.Errorf("DirectRequestHash(%s) == DirectRequestHash(%s); numbers are kept as written", pair[0], pair[1])
		}
	}
	if h(`{"n":1.50}`) != h("{ \"n\" :\n1.50 }") {
		t.Error("white space around a number changed the hash")
	}
	if canon, _ := canonjson.Canonicalize([]byte(`{"n":1.50}`)); string(canon) != `{"n":1.50}` {
		t.Errorf("canonjson rewrote 1.50 as %s", canon)
	}
}
