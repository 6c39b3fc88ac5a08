package api_test

import (
	"strings"
	"testing"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/idempotency"
)

func TestParseIdempotencyKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", api.MaxIdempotencyKeyLen)
	tests := []struct {
		in   string
		want string // "" means refused
	}{
		{"abc", "abc"},
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{`"abc"`, "abc"},
		{`"a\"b\\c"`, `a"b\c`},
		{`  "abc"  `, "abc"},
		{" abc\t", "abc"},
		{"a b", "a b"},
		{`"a b"`, "a b"},
		{`"a1, a2"`, "a1, a2"}, // one string that holds a comma
		{`","`, ","},
		{`a"b`, `a"b`},
		{long, long},
		{`"` + long + `"`, long},
		{"~!@#$%^&*()_+{}|:<>?", "~!@#$%^&*()_+{}|:<>?"},

		{"", ""},
		{"   ", ""},
		{`""`, ""},
		{long + "k", ""},
		{`"` + long + `k"`, ""},
		{`" abc"`, ""}, // a space may not start a key
		{`"abc "`, ""},
		{`"abc`, ""},
		{`"abc"x`, ""},
		{`"abc";p=1`, ""},
		{`"a\nb"`, ""},
		{`"a\`, ""},
		{"a\tb", ""},
		{"a\x00b", ""},
		{"a\x7fb", ""},
		{"clé", ""},
		{"\"ab\x01\"", ""},
		// A list in one header: two keys, or a proxy's join of two lines.
		{"a1, a2", ""},
		{"a1,a2", ""},
		{"a1,", ""},
		{",a2", ""},
		{",", ""},
		{`"a1", "a2"`, ""},
		{`"a1",a2`, ""},
		{`a1, "a2"`, ""},
	}
	for _, tt := range tests {
		got, err := api.ParseIdempotencyKey(tt.in)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("ParseIdempotencyKey(%q) = %q, want an error", tt.in, got)
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("ParseIdempotencyKey(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParseIdempotencyKey checks the properties every accepted key has,
// whatever the header held: it never panics, the key is 1 to 255 printable
// ASCII characters without a space at either end, the plane accepts it,
// its quoted form names the same key, white space around the value changes
// nothing, and a key that does not start with a quote is its own bare form.
func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `"a\\"`, " x ", `"`, `""`, "\x00", strings.Repeat("a", 256)} {
		f.Add(s)
	}
	// Quoted forms and their escapes, the length bounds in both forms, and
	// what lies just outside printable ASCII.
	for _, s := range []string{
		`"a\"b\\c"`, `"\\"`, `"\""`, `"\"`, `"\a"`, `"\u0041"`, `"a"b"`, `"a" `, ` "a"`, `"a";x`, `"a",`, `"a"  "b"`,
		`"` + strings.Repeat(`\"`, 255) + `"`, `"` + strings.Repeat(`\"`, 256) + `"`,
		strings.Repeat("k", 255), strings.Repeat("k", 256), `"` + strings.Repeat("k", 255) + `"`, `"` + strings.Repeat("k", 256) + `"`,
		"\t" + strings.Repeat("k", 255) + " ", "a b", " a b ", `" a"`, `"a "`,
		"clé", "\u00e9", "\xff", "\xc3\xa9", "\U0001F600", `"é"`, "a\x7fb", "a\x1fb", "\x20", "~", "!", `"~"`,
		"a\r\nb", "a\nb", "\x00\"abc\"",
		"a1, a2", "a1,a2", ",", `"a1, a2"`, `"a1", "a2"`, `a1, "a2"`, `","`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, err := api.ParseIdempotencyKey(in)
		if err != nil {
			return
		}
		if key == "" || len(key) > api.MaxIdempotencyKeyLen || key[0] == ' ' || key[len(key)-1] == ' ' {
			t.Fatalf("ParseIdempotencyKey(%q) = %q: bad length or edge space", in, key)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("ParseIdempotencyKey(%q) = %q: byte %#x is not printable ASCII", in, key, key[i])
			}
		}
		if err := idempotency.ValidateKey(key); err != nil {
			t.Fatalf("ParseIdempotencyKey(%q) = %q, which the plane refuses: %v", in, key, err)
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := api.ParseIdempotencyKey(quoted); err != nil || again != key {
			t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; want %q back from its quoted form", quoted, again, err, key)
		}
		// White space around the header value is no part of the key.
		if again, err := api.ParseIdempotencyKey(" \t" + in + "\t "); err != nil || again != key {
			t.Fatalf("ParseIdempotencyKey(%q with white space around) = %q, %v; want %q", in, again, err, key)
		}
		// A key that does not start with a quote is its own bare form,
		// unless it holds a comma: bare, that is a list, and refused.
		switch again, err := api.ParseIdempotencyKey(key); {
		case strings.Contains(key, ","):
			if err == nil {
				t.Fatalf("ParseIdempotencyKey(%q) = %q, want the bare list refused", key, again)
			}
		case key[0] != '"':
			if err != nil || again != key {
				t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; want the bare key back", key, again, err)
			}
		}
		// Accepted, the value is one key: bare, it holds no comma.
		if v := strings.Trim(in, " \t"); !strings.HasPrefix(v, `"`) && strings.Contains(v, ",") {
			t.Fatalf("ParseIdempotencyKey(%q) = %q: a bare list taken as one key", in, key)
		}
	})
}
