package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/testkit/jsonforms"
	"github.com/searchd/searchd/runs"
)

// The request-hash fuzz targets run the API's own decoding (the handler,
// from headers and raw body to the admission inputs) in this process, with
// a Starter that records what it is asked and answers 201, and compute the
// request hash from what it recorded exactly as the real Starter does. So
// they prove, for arbitrary requests, that the whole path from bytes to
// hash merges requests written differently and keeps different requests
// apart, without a database in the loop.

// recordingStarter records the inputs of every start and admits each.
type recordingStarter struct {
	mu     sync.Mutex
	saved  []admission.SavedSearchStart
	direct []admission.DirectStart
}

func (r *recordingStarter) StartSavedSearch(_ context.Context, p admission.SavedSearchStart) (admission.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.saved = append(r.saved, p)
	return admission.Result{Run: &runs.Run{ID: uuid.New(), Kind: runs.KindSavedSearch}, Created: true}, nil
}

func (r *recordingStarter) StartDirect(_ context.Context, p admission.DirectStart) (admission.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.direct = append(r.direct, p)
	return admission.Result{Run: &runs.Run{ID: uuid.New(), Kind: p.Kind}, Created: true}, nil
}

// take returns and forgets what was recorded.
func (r *recordingStarter) take() ([]admission.SavedSearchStart, []admission.DirectStart) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, d := r.saved, r.direct
	r.saved, r.direct = nil, nil
	return s, d
}

// The stores a start never touches: a call would panic, and the panic
// would answer 500, which the targets refuse.
type (
	noSavedSearches struct{ api.SavedSearches }
	noSnapshots     struct{ api.Snapshots }
	noRuns          struct{ api.Runs }
	noProviderJobs  struct{ api.ProviderJobs }
	noDispatches    struct{ api.Dispatches }
)

// hashRig is a handler whose Starter records, and a token for it.
type hashRig struct {
	h       http.Handler
	starter *recordingStarter
	token   string
}

func newHashRig(t testing.TB) *hashRig {
	t.Helper()
	st := &recordingStarter{}
	srv, err := api.New(fakeDeps(t, st))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := auth.SignToken(testSecret, uuid.New(), "fuzzer", time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &hashRig{h: srv.Handler(), starter: st, token: tok}
}

// post sends one request and returns its status and body. body nil sends
// none; contentType "" sends no Content-Type.
func (r *hashRig) post(path string, body []byte, contentType, key string) (int, string) {
	var hr *http.Request
	if body == nil {
		hr = httptest.NewRequest(http.MethodPost, path, nil)
	} else {
		hr = httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	}
	if contentType != "" {
		hr.Header.Set("Content-Type", contentType)
	}
	hr.Header.Set("Authorization", "Bearer "+r.token)
	hr.Header.Set(api.HeaderIdempotencyKey, key)
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, hr)
	return rec.Code, rec.Body.String()
}

// startBody is one way to write a saved-search start.
type startBody struct {
	body        []byte // nil: no body at all
	contentType string
	key         string // the Idempotency-Key header
}

// FuzzStartRequestHash writes one saved-search start (max_results, or the
// default; a note) in many equivalent forms and sends each through the
// handler: members in any order, any white space, any escaping of the
// note, a default written, omitted or null, a body or none, every JSON
// Content-Type, a bare or a quoted Idempotency-Key. Every form must be
// admitted with the same key and the same request hash. A start that
// differs in max_results, in the note or in the saved search must hash
// differently, and a max_results written as anything but an integer in
// range must be refused (400), never admitted under another hash.
func FuzzStartRequestHash(f *testing.F) {
	for _, s := range []struct {
		max    uint16
		hasMax bool
		note   string
	}{
		{0, false, ""}, {99, true, ""}, {0, true, "n"}, {999, true, strings.Repeat("é", 500)},
		{4, true, "a\"b\\c/d<e>&\u2028\U0001F600\n\t"}, {0, false, "\x00"}, {0, false, "\xff"},
	} {
		f.Add(s.max, s.hasMax, s.note, "key", uint64(1))
	}
	f.Add(uint16(7), true, "note", `a"b\c`, uint64(2))
	f.Add(uint16(7), true, "", strings.Repeat("k", 255), uint64(3))

	rig := newHashRig(f)
	f.Fuzz(func(t *testing.T, maxResults uint16, hasMax bool, note, key string, style uint64) {
		// What the API accepts: a note of at most 500 characters of UTF-8
		// without NUL, a key of printable ASCII.
		note = strings.ReplaceAll(strings.ToValidUTF8(note, "\uFFFD"), "\x00", "")
		if utf8.RuneCountInString(note) > admission.MaxNoteLen {
			note = string([]rune(note)[:admission.MaxNoteLen])
		}
		if parsed, err := api.ParseIdempotencyKey(key); err != nil || parsed != key {
			key = "key"
		}
		maxRes := 0 // omitted: the default
		if hasMax {
			maxRes = int(maxResults)%admission.MaxMaxResults + 1
		}
		id := uuid.NewSHA1(uuid.NameSpaceOID, []byte(note+strconv.Itoa(maxRes)))
		path := "/v1/saved-searches/" + id.String() + "/start"
		w := jsonWriter{jsonforms.Writer{Rng: rand.New(rand.NewPCG(style, 5))}}

		// hashOf sends a form and returns the hash of what the starter
		// was asked, failing unless the start was admitted.
		hashOf := func(p string, sb startBody) (string, admission.SavedSearchStart) {
			t.Helper()
			status, body := rig.post(p, sb.body, sb.contentType, sb.key)
			saved, _ := rig.starter.take()
			if status != http.StatusCreated || len(saved) != 1 {
				t.Fatalf("start %q (Content-Type %q, key %q) = %d %s; want 201", sb.body, sb.contentType, sb.key, status, body)
			}
			return admission.SavedSearchRequestHash(saved[0].SavedSearchID, saved[0].Options), saved[0]
		}
		forms := w.startForms(maxRes, note, key)
		want, first := hashOf(path, forms[0])
		if first.SavedSearchID != id || first.IdempotencyKey != key {
			t.Fatalf("the starter was asked for %s with key %q, want %s and %q", first.SavedSearchID, first.IdempotencyKey, id, key)
		}
		for _, sb := range forms[1:] {
			if got, p := hashOf(path, sb); got != want || p.IdempotencyKey != key {
				t.Fatalf("start %q (Content-Type %q, key %q) hashes %s with key %q; %q hashes %s with key %q",
					sb.body, sb.contentType, sb.key, got, p.IdempotencyKey, forms[0].body, want, key)
			}
		}

		// Different starts hash differently.
		normal := admission.StartOptions{MaxResults: maxRes}.Normalize().MaxResults
		other := normal%admission.MaxMaxResults + 1
		for _, d := range []struct {
			what string
			path string
			body string
		}{
			{"max_results changed", path, fmt.Sprintf(`{"max_results":%d,"note":%s}`, other, w.Str(note))},
			{"note changed", path, fmt.Sprintf(`{"max_results":%d,"note":%s}`, normal, w.Str(note+"!"))},
			{"another saved search", "/v1/saved-searches/" + uuid.NewString() + "/start", string(forms[0].body)},
		} {
			if d.what == "note changed" && utf8.RuneCountInString(note) == admission.MaxNoteLen {
				first := "!"
				if strings.HasPrefix(note, first) {
					first = "?"
				}
				d.body = fmt.Sprintf(`{"max_results":%d,"note":%s}`, normal, w.Str(first+string([]rune(note)[1:])))
			}
			if got, _ := hashOf(d.path, startBody{body: []byte(d.body), contentType: "application/json", key: key}); got == want {
				t.Fatalf("%s: %s hashes the same %s as %q", d.what, d.body, got, forms[0].body)
			}
		}

		// An integral max_results written as a fraction or with an
		// exponent is the same integer (JSON Schema's integer is a value,
		// not a spelling): it starts and hashes like the plain form.
		for _, same := range []string{fmt.Sprintf("%d.0", normal), fmt.Sprintf("%de0", normal),
			fmt.Sprintf("%d.000E+0", normal)} {
			body := `{"max_results":` + same + `}`
			got, _ := hashOf(path, startBody{body: []byte(body), contentType: "application/json", key: key})
			plain, _ := hashOf(path, startBody{body: []byte(fmt.Sprintf(`{"max_results":%d}`, normal)), contentType: "application/json", key: key})
			if got == "" || got != plain {
				t.Fatalf("start %s hashes %q, want the hash %q of max_results %d", body, got, plain, normal)
			}
		}

		// A max_results that is not an integer in range is refused, never
		// read as another number.
		for _, bad := range []string{
			fmt.Sprintf("%d.5", normal), fmt.Sprintf("%de-1", normal*10+1), fmt.Sprintf("%q", strconv.Itoa(normal)),
			"0", "-1", strconv.Itoa(admission.MaxMaxResults + 1), "1e400", "true", "[1]",
		} {
			body := `{"max_results":` + bad + `}`
			status, answer := rig.post(path, []byte(body), "application/json", key)
			if saved, _ := rig.starter.take(); status != http.StatusBadRequest || len(saved) != 0 {
				t.Fatalf("start %s = %d %s (starter asked %d times); want 400 and no start", body, status, answer, len(saved))
			}
		}
	})
}

// startForms returns equivalent ways to write a start with maxRes (0: the
// default, omitted) and note, the first the plainest.
func (w jsonWriter) startForms(maxRes int, note, key string) []startBody {
	const js = "application/json"
	quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
	explicit := maxRes
	if explicit == 0 {
		explicit = admission.DefaultMaxResults
	}
	plain, _ := json.Marshal(map[string]any{"max_results": explicit, "note": note})
	forms := []startBody{{body: plain, contentType: js, key: key}}
	for range 4 {
		members := []string{
			w.WS() + w.Str("max_results") + w.WS() + ":" + w.WS() + strconv.Itoa(explicit) + w.WS(),
			w.WS() + w.Str("note") + w.WS() + ":" + w.WS() + w.Str(note) + w.WS(),
		}
		if explicit == admission.DefaultMaxResults {
			members[0] = w.Pick(members[0], "", `"max_results"`+w.WS()+":"+w.WS()+"null")
		}
		if note == "" {
			members[1] = w.Pick(members[1], "", `"note":null`)
		}
		w.Rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		members = slices.DeleteFunc(members, func(m string) bool { return m == "" })
		forms = append(forms, startBody{
			body:        []byte(w.WS() + "{" + strings.Join(members, ",") + "}" + w.WS()),
			contentType: w.Pick(js, "application/json; charset=utf-8", "application/json;charset=UTF-8", "application/vnd.searchd+json"),
			key:         w.Pick(key, quoted, " "+key+"\t", "\t"+quoted+" "),
		})
	}
	if explicit == admission.DefaultMaxResults && note == "" {
		// The body is optional: none at all, or only white space, is the
		// default start too.
		forms = append(forms,
			startBody{key: key},
			startBody{body: []byte{}, key: key},
			startBody{body: []byte(" \r\n\t"), contentType: js, key: key},
			startBody{body: []byte(" \n "), key: key},
			startBody{body: []byte(`{}`), contentType: js, key: quoted})
	}
	return forms
}

// FuzzDirectStartRequestHash sends a direct start with arbitrary input
// bytes through the handler. When the API admits it, the same start is
// written in other forms (members of the body and of every object of the
// input in any order, any white space, any escaping, an empty input
// omitted or null) and each must be admitted with the same request hash;
// a start whose input differs in one value, one member, or one number's
// written form (canonjson keeps numbers as written), or whose kind or name
// differs, must hash differently. When the API refuses the input, it
// answers 4xx without asking the starter.
func FuzzDirectStartRequestHash(f *testing.F) {
	for _, in := range []string{
		`{}`, `null`, `{"a":1,"b":{"c":[1,2],"d":"x"}}`, `{"n":[0,-0,1.0,1e2,1E-2,12345678901234567890]}`,
		`{"s":"\u00e9\ud83d\ude00<&>\/\"\\\b\f\n\r\t"}`, `{"a":{"a":{"a":{"a":[[[[null,true,false]]]]}}}}`,
		`{"a":1,"a":2}`, `[]`, `"x"`, `1`, `{"n":1e400}`, `{"s":"\u0000"}`, `{"":""}`, `{"\ud800":"\udc00"}`,
	} {
		f.Add(false, "capability", []byte(in), uint64(1))
	}
	f.Add(true, "d\u00e9finition", []byte(`{"k":"v"}`), uint64(2))

	rig := newHashRig(f)
	f.Fuzz(func(t *testing.T, definition bool, name string, input []byte, style uint64) {
		name = strings.ReplaceAll(strings.ToValidUTF8(name, "\uFFFD"), "\x00", "")
		if name == "" || utf8.RuneCountInString(name) > 190 {
			name = "n"
		}
		kind := "capability"
		if definition {
			kind = "definition"
		}
		w := jsonWriter{jsonforms.Writer{Rng: rand.New(rand.NewPCG(style, 9))}}
		send := func(body []byte) (int, string, []admission.DirectStart) {
			status, answer := rig.post("/v1/runs", body, "application/json", "key")
			_, direct := rig.starter.take()
			return status, answer, direct
		}
		hashOf := func(body []byte) string {
			t.Helper()
			status, answer, direct := send(body)
			if status != http.StatusCreated || len(direct) != 1 {
				t.Fatalf("direct start %s = %d %s; want 201", body, status, answer)
			}
			h, err := admission.DirectRequestHash(direct[0].Kind, direct[0].Name, direct[0].Input)
			if err != nil {
				t.Fatalf("direct start %s was admitted, but its input %s cannot be hashed: %v", body, direct[0].Input, err)
			}
			return h
		}

		first := []byte(`{"kind":` + w.Str(kind) + `,"name":` + w.Str(name) + `,"input":` + string(input) + `}`)
		status, answer, direct := send(first)
		switch {
		case status >= 500:
			t.Fatalf("direct start %q = %d %s", first, status, answer)
		case status != http.StatusCreated:
			if len(direct) != 0 {
				t.Fatalf("direct start %q = %d %s, yet the starter was asked", first, status, answer)
			}
			return
		}
		want, err := admission.DirectRequestHash(direct[0].Kind, direct[0].Name, direct[0].Input)
		if err != nil {
			t.Fatalf("admitted input %s cannot be hashed: %v", direct[0].Input, err)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(input))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("admitted input %q does not decode: %v", input, err)
		}
		if v == nil {
			v = map[string]any{}
		}
		obj, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("admitted input %q is not an object", input)
		}

		body := func(kind, name string, input []byte) []byte {
			members := []string{
				w.WS() + w.Str("kind") + w.WS() + ":" + w.WS() + w.Str(kind),
				w.WS() + w.Str("name") + w.WS() + ":" + w.WS() + w.Str(name),
			}
			if input != nil {
				members = append(members, w.WS()+w.Str("input")+w.WS()+":"+string(input))
			}
			w.Rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
			return []byte(w.WS() + "{" + strings.Join(members, ",") + w.WS() + "}" + w.WS())
		}
		for range 4 {
			if b := body(kind, name, w.Value(v)); hashOf(b) != want {
				t.Fatalf("%s hashes %s; %s hashes %s", b, hashOf(b), first, want)
			}
		}
		if len(obj) == 0 {
			for _, b := range [][]byte{body(kind, name, nil), body(kind, name, []byte("null")), body(kind, name, []byte(" { } "))} {
				if hashOf(b) != want {
					t.Fatalf("empty input: %s and %s hash differently", b, first)
				}
			}
		}

		differ := func(what string, b []byte) {
			t.Helper()
			if h := hashOf(b); h == want {
				t.Fatalf("%s: %s hashes the same %s as %s", what, b, h, first)
			}
		}
		otherKind := map[string]string{"capability": "definition", "definition": "capability"}[kind]
		differ("kind changed", body(otherKind, name, w.Value(v)))
		differ("name changed", body(kind, name+"!", w.Value(v)))
		key := "~"
		for _, ok := obj[key]; ok; _, ok = obj[key] {
			key += "~"
		}
		differ("member added", body(kind, name, w.Value(jsonforms.With(obj, key, json.Number("0")))))
		if len(obj) > 0 {
			keys := slices.Sorted(maps.Keys(obj))
			differ("member removed", body(kind, name, w.Value(jsonforms.Without(obj, keys[0]))))
		}
		if m, ok := jsonforms.MutateFirst(v, jsonforms.NumberLeaf); ok {
			// A number in another form may leave float64's range; then the
			// API refuses it, which is no merge either.
			if status, answer, _ := send(body(kind, name, w.Value(m))); status == http.StatusCreated {
				differ("a number written in another form", body(kind, name, w.Value(m)))
			} else if status >= 500 {
				t.Fatalf("%d %s", status, answer)
			}
		}
		if m, ok := jsonforms.MutateFirst(v, jsonforms.StringLeaf); ok {
			differ("a string changed", body(kind, name, w.Value(m)))
		}
	})
}

// jsonWriter writes JSON values in arbitrary but equivalent forms (see
// package jsonforms), with this file's forms of whole requests beside.
type jsonWriter struct{ jsonforms.Writer }
