package api

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

func TestAListTakesASeatPerFiftyRowsItAsksFor(t *testing.T) {
	t.Parallel()
	e := echo.New()
	for _, tt := range []struct {
		query string
		want  int
	}{
		{"", 1}, {"?limit=1", 1}, {"?limit=50", 1}, {"?limit=51", 2}, {"?limit=100", 2}, {"?limit=101", 3},
		{"?limit=200", 4}, {"?limit=100000", 4}, {"?limit=lots", 1}, {"?limit=-5", 1},
	} {
		c := e.NewContext(httptest.NewRequest(http.MethodGet, "/v1/runs"+tt.query, nil), httptest.NewRecorder())
		if got := requestWidth(c); got != tt.want {
			t.Errorf("requestWidth(%q) = %d, want %d", tt.query, got, tt.want)
		}
	}
}

func TestABodyTakesASeatPerHalfMegabyte(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		length int64
		want   int
	}{
		{0, 1}, {17, 1}, {512 << 10, 1}, {512<<10 + 1, 2}, {1 << 20, 2}, {3 << 20, 6}, {4 << 20, 8}, {1 << 30, 8},
	} {
		if got := bodyWidth(tt.length); got != tt.want {
			t.Errorf("bodyWidth(%d) = %d, want %d", tt.length, got, tt.want)
		}
	}
}

// failing is a body that fails after its bytes.
type failing struct {
	r   io.Reader
	err error
}

func (f *failing) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// TestReadBodyReadsTheWholeBodyAheadOfTheSeat: every body is read whole
// before the request queues, and the handler reads the same bytes; the
// budget's charge covers it until the caller gives it back. A body over
// the limit is 413, one cut short 400, one the budget cannot take 503.
func TestReadBodyReadsTheWholeBodyAheadOfTheSeat(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	s := &Server{d: Deps{MaxBodyBytes: limit, BodyTimeout: DefaultBodyTimeout}, requestBodies: newBodyBudget(4 * (limit + 1))}
	big := strings.Repeat("x", 600_000)
	for _, tt := range []struct {
		name   string
		body   io.Reader
		length int64
		want   string
		status int
	}{
		{"a small body of known length", strings.NewReader(`{"max_results":5}`), 17, `{"max_results":5}`, 0},
		{"a small body of unknown length", strings.NewReader(`{"a":1}`), -1, `{"a":1}`, 0},
		{"a large body of unknown length", strings.NewReader(big), -1, big, 0},
		{"a large body of known length", strings.NewReader(big), int64(len(big)), big, 0},
		{"a body of unknown length over the limit", strings.NewReader(big + big), -1, "", http.StatusRequestEntityTooLarge},
		{"a body declared over the limit", strings.NewReader(big + big), 2 * int64(len(big)), "", http.StatusRequestEntityTooLarge},
		{"a body cut short", &failing{strings.NewReader("abc"), errors.New("connection cut")}, -1, "", http.StatusBadRequest},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(tt.body))
		r.ContentLength = tt.length
		c := echo.New().NewContext(r, httptest.NewRecorder())
		n, charged, err := s.readBody(c)
		var p *apiError
		switch {
		case tt.status != 0:
			if !errors.As(err, &p) || p.status != tt.status || charged != 0 {
				t.Errorf("%s: readBody = %v (charged %d), want %d", tt.name, err, charged, tt.status)
			}
			continue
		case err != nil || n != int64(len(tt.want)) || charged < n:
			t.Errorf("%s: readBody = %d bytes charged %d, %v; want %d", tt.name, n, charged, err, len(tt.want))
			continue
		}
		got, err := io.ReadAll(c.Request().Body)
		if string(got) != tt.want || err != nil {
			t.Errorf("%s: the handler read %d bytes (%v), want %d", tt.name, len(got), err, len(tt.want))
		}
		s.requestBodies.give(charged)
	}
	// Bodies over 64 KiB share three quarters of the budget: three of
	// the limit; a fourth is refused unread while they are held.
	var held []int64
	for i := range 4 {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("y", limit)))
		c := echo.New().NewContext(r, httptest.NewRecorder())
		_, charged, err := s.readBody(c)
		var p *apiError
		switch {
		case i < 3 && err != nil:
			t.Fatalf("body %d: %v", i, err)
		case i == 3 && (!errors.As(err, &p) || p.status != http.StatusServiceUnavailable):
			t.Errorf("a body past the budget: %v, want 503", err)
		}
		held = append(held, charged)
	}
	for _, n := range held {
		s.requestBodies.give(n)
	}
}
