package canonjson

import "testing"

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{`{"b":1, "a" : [true, null, "x"]}`, `{"a":[true,null,"x"],"b":1}`},
		{" \n{\"z\":{\"y\":2,\"x\":1}}\t", `{"z":{"x":1,"y":2}}`},
		{`{"n":1.0,"m":12345678901234567890}`, `{"m":12345678901234567890,"n":1.0}`},
		{`"<&>"`, `"<&>"`},
		{`"\u00e9"`, `"é"`},
		{`[]`, `[]`},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte(tt.in))
		if err != nil {
			t.Errorf("Canonicalize(%q) error %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("Canonicalize(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalizeRefusesInvalid(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"a":1} {}`, `{"a":1}x`, `nul`} {
		if got, err := Canonicalize([]byte(in)); err == nil {
			t.Errorf("Canonicalize(%q) = %s, want an error", in, got)
		}
	}
}
