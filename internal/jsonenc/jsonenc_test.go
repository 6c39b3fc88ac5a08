package jsonenc_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/jsonenc"
)

// same fails t unless got is what encoding/json writes for v.
func same(t *testing.T, got []byte, gotErr error, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%#v: error %v, encoding/json's %v", v, gotErr, wantErr)
	}
	if wantErr == nil && !bytes.Equal(got, want) {
		t.Fatalf("%#v:\n got %s\nwant %s", v, got, want)
	}
}

var samples = []string{"", "plain", "run-1/email.send/1", `quo"te`, `back\slash`, "<script>&</script>",
	"tab\there", "nl\n", "\x00\x1f\x7f", "é ü 日本", "\u2028\u2029", "bad \xff utf-8", "emoji 😀"}

func FuzzString(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		prefix := []byte("x")
		got := jsonenc.String(prefix, s)
		if !bytes.HasPrefix(got, prefix) {
			t.Fatal("the prefix is lost")
		}
		same(t, got[1:], nil, s)
		if s != "" {
			p := &s
			same(t, jsonenc.NullString(nil, p), nil, p)
		}
	})
}

func TestNulls(t *testing.T) {
	var s *string
	var u *uuid.UUID
	same(t, jsonenc.NullString(nil, s), nil, s)
	same(t, jsonenc.NullUUID(nil, u), nil, u)
}

func TestUUID(t *testing.T) {
	for _, u := range []uuid.UUID{uuid.Nil, uuid.Max, uuid.New(), uuid.MustParse("0123abcd-4567-89ef-0123-456789abcdef")} {
		same(t, jsonenc.UUID(nil, u), nil, u)
		same(t, jsonenc.NullUUID(nil, &u), nil, &u)
	}
}

func TestTime(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	for _, tm := range []time.Time{
		{}, time.Now(), time.Now().UTC(), time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 1, 13, 0, 0, 120000, east), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600)),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("near", -24*3600+1)),
	} {
		got, err := jsonenc.Time(nil, tm)
		same(t, got, err, tm)
	}
}

func FuzzRaw(f *testing.F) {
	for _, s := range []string{`{"max_results": 50}`, `{"note":"a <b> & c"}`, ` [1, 2 , {"a" : null}] `, `"\u2028"`,
		"\"\u2028\"", `{`, ``, `nul`, `{"a":1}{"b":2}`, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := jsonenc.Raw([]byte("x"), raw)
		if err == nil {
			if !bytes.HasPrefix(got, []byte("x")) {
				t.Fatal("the prefix is lost")
			}
			got = got[1:]
		}
		same(t, got, err, json.RawMessage(raw))
	})
}

func TestRawNil(t *testing.T) {
	got, err := jsonenc.Raw(nil, nil)
	same(t, got, err, json.RawMessage(nil))
}
