package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestServerTimingCarriesTheHandlersPhases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
	}{
		{"header written", func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated); _, _ = io.WriteString(w, "{}") }},
		{"body only", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "{}") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(timed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				p := phasesOf(r.Context())
				if p == nil {
					t.Error("phasesOf(request context) = nil, want the request's phases")
					return
				}
				p.acquire.Store(int64(1500 * time.Microsecond))
				p.sql.Store(int64(2250 * time.Microsecond))
				tc.write(w)
			})))
			defer srv.Close()
			res, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			h := res.Header.Get("Server-Timing")
			st, ok := parseServerTiming(h)
			if !ok {
				t.Fatalf("parseServerTiming(%q) failed", h)
			}
			if st.acquire != 1500*time.Microsecond || st.sql != 2250*time.Microsecond || st.handler <= 0 {
				t.Errorf("parseServerTiming(%q) = %+v, want acquire 1.5ms, sql 2.25ms, handler > 0", h, st)
			}
		})
	}
}

func TestParseServerTimingRefusesOtherHeaders(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"", "db;dur=1", "handler;dur=1, acquire;dur=x, sql;dur=1", "handler;dur=1, sql;dur=1"} {
		if st, ok := parseServerTiming(h); ok {
			t.Errorf("parseServerTiming(%q) = %+v, true; want false", h, st)
		}
	}
}

func TestHistogramBucketsAreUpperBoundsInclusive(t *testing.T) {
	t.Parallel()
	last := len(histBounds)
	for _, tc := range []struct {
		latency time.Duration
		bucket  int
	}{
		{0, 0},
		{125 * time.Microsecond, 0},
		{126 * time.Microsecond, 1},
		{150 * time.Millisecond, 11}, // ≤ 256 ms: 125 µs × 2^11
		{1024 * time.Millisecond, last - 1},
		{2 * time.Second, last},
	} {
		counts := histogram([]time.Duration{tc.latency})
		if counts[tc.bucket] != 1 {
			t.Errorf("histogram(%s) = %v, want its one request in bucket %d", tc.latency, counts, tc.bucket)
		}
	}
}
