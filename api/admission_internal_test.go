package api

import (
	"bytes"
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
		rest   bool
		want   int
	}{
		{0, false, 1}, {17, false, 1}, {512 << 10, false, 1}, {512<<10 + 1, true, 2}, {1 << 20, true, 2},
		{3 << 20, true, 6}, {4 << 20, true, 8}, {1 << 30, true, 8},
		{-1, false, 1}, // unknown length, read whole ahead: small
		{-1, true, 8},  // unknown length, more than the read ahead: perhaps the limit
	} {
		if got := bodyWidth(tt.length, tt.rest); got != tt.want {
			t.Errorf("bodyWidth(%d, %v) = %d, want %d", tt.length, tt.rest, got, tt.want)
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

func TestPreReadGivesTheHandlerTheSameBytesOrTheSameError(t *testing.T) {
	t.Parallel()
	errCut := errors.New("connection cut")
	big := strings.Repeat("x", preReadBytes+100)
	for _, tt := range []struct {
		name    string
		body    io.Reader
		length  int64
		limit   int64
		want    string
		wantErr error
	}{
		{"a small body of known length", strings.NewReader(`{"max_results":5}`), 17, 4 << 20, `{"max_results":5}`, nil},
		{"a small body of unknown length", strings.NewReader(`{"a":1}`), -1, 4 << 20, `{"a":1}`, nil},
		{"a body of unknown length longer than the read ahead", strings.NewReader(big), -1, 4 << 20, big, nil},
		{"a body of unknown length over a small limit", strings.NewReader(big), -1, 1024, big, nil},
		{"a body declared longer than the read ahead", strings.NewReader(big), int64(len(big)), 4 << 20, big, nil},
		{"a body cut short", &failing{strings.NewReader("abc"), errCut}, -1, 4 << 20, "abc", errCut},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(tt.body))
		r.ContentLength = tt.length
		rest := preRead(r, tt.limit)
		if wantRest := len(tt.want) > preReadBytes || int64(len(tt.want)) > tt.limit; rest != wantRest && tt.wantErr == nil {
			t.Errorf("%s: preRead reports rest %v, want %v", tt.name, rest, wantRest)
		}
		got, err := io.ReadAll(r.Body)
		if string(got) != tt.want || !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: read %d bytes (%v), want %d (%v)", tt.name, len(got), err, len(tt.want), tt.wantErr)
		}
		if err := r.Body.Close(); err != nil {
			t.Errorf("%s: Close = %v", tt.name, err)
		}
	}
	// A body within the read ahead is read to its end before the handler
	// runs; one beyond it is not read past the read ahead.
	counted := &countingReader{r: bytes.NewReader([]byte(big))}
	r := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(counted))
	r.ContentLength = -1
	preRead(r, 1024)
	if counted.n != 1025 {
		t.Errorf("read ahead %d bytes of a body of unknown length under a 1024-byte limit, want 1025", counted.n)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
