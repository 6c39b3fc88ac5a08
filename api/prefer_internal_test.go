package api

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func TestPreferWaitSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string // one Prefer header each
		want   int64
		ok     bool
	}{
		{"no header", nil, 0, false},
		{"plain", []string{"wait=5"}, 5, true},
		{"name is case-insensitive", []string{"WAIT=5"}, 5, true},
		{"white space around =", []string{"wait = 5"}, 5, true},
		{"zero", []string{"wait=0"}, 0, true},
		{"among others", []string{"respond-async, wait=10, handling=lenient"}, 10, true},
		{"in a second header", []string{"handling=lenient", "wait=7"}, 7, true},
		{"quoted value", []string{`wait="12"`}, 12, true},
		{"parameters after it", []string{"wait=5; foo=bar"}, 5, true},
		{"quoted comma is not a separator", []string{`handling=lenient; foo="a, wait=3", wait=9`}, 9, true},
		{"empty elements", []string{",, wait=4 ,"}, 4, true},
		{"first wins", []string{"wait=5, wait=10"}, 5, true},
		{"first wins across headers", []string{"wait=6", "wait=1"}, 6, true},
		{"a malformed first wait is no wait", []string{"wait=abc, wait=10"}, 0, false},
		{"no value", []string{"wait"}, 0, false},
		{"empty value", []string{"wait="}, 0, false},
		{"negative", []string{"wait=-1"}, 0, false},
		{"signed", []string{"wait=+3"}, 0, false},
		{"fraction", []string{"wait=1.5"}, 0, false},
		{"unit", []string{"wait=5s"}, 0, false},
		{"another preference", []string{"waiting=5"}, 0, false},
		{"unterminated quote swallows the rest", []string{`foo="x, wait=3`}, 0, false},
		{"huge saturates", []string{"wait=99999999999999999999999"}, math.MaxInt64, true},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.values {
			h.Add(HeaderPrefer, v)
		}
		got, ok := preferWaitSeconds(h)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: preferWaitSeconds(%q) = %d, %v; want %d, %v", tt.name, tt.values, got, ok, tt.want, tt.ok)
		}
	}
}

func TestWaitPreferenceIsCappedAndIgnoredWhenTheServerDoesNotWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		max         time.Duration
		prefer      string
		wantWait    time.Duration
		wantApplied string
	}{
		{30 * time.Second, "wait=5", 5 * time.Second, "wait=5"},
		{30 * time.Second, "wait=30", 30 * time.Second, "wait=30"},
		{30 * time.Second, "wait=31", 30 * time.Second, "wait=30"},
		{30 * time.Second, "wait=99999999999999999999999", 30 * time.Second, "wait=30"},
		{10 * time.Second, "wait=20", 10 * time.Second, "wait=10"},
		{30 * time.Second, "wait=0", 0, "wait=0"},
		{30 * time.Second, "wait=soon", 0, ""},
		{30 * time.Second, "", 0, ""},
		{0, "wait=5", 0, ""},
	}
	for _, tt := range tests {
		s := &Server{d: Deps{MaxPreferWait: tt.max}}
		h := http.Header{}
		if tt.prefer != "" {
			h.Set(HeaderPrefer, tt.prefer)
		}
		wait, applied := s.waitPreference(h)
		if wait != tt.wantWait || applied != tt.wantApplied {
			t.Errorf("max %s: waitPreference(Prefer: %q) = %s, %q; want %s, %q",
				tt.max, tt.prefer, wait, applied, tt.wantWait, tt.wantApplied)
		}
	}
}
