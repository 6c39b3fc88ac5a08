package api

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
	s := &Server{d: Deps{MaxBodyBytes: limit, BodyTimeout: DefaultBodyTimeout}, requestBodies: newBodyBudget(4*(limit+1), 0, requestRefusals)}
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

// TestABodyWaitsForTheBudget: with a wait set (the server's is the
// seat queue's longest wait), a body the budget cannot take waits
// unread until another gives its bytes back, then is read; one whose wait
// runs out is 503. (Refused at once, 64 honest clients writing 1 MiB
// baselines were answered 503 three times in four.)
func TestABodyWaitsForTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 1 << 20
		s := &Server{d: Deps{MaxBodyBytes: limit, BodyTimeout: DefaultBodyTimeout},
			requestBodies: newBodyBudget(4*(limit+1), time.Second, requestRefusals)}
		read := func() chan error {
			done := make(chan error, 1)
			go func() {
				r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("y", limit)))
				_, _, err := s.readBody(echo.New().NewContext(r, httptest.NewRecorder()))
				done <- err
			}()
			return done
		}
		var held []int64
		for range 3 {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("y", limit)))
			_, charged, err := s.readBody(echo.New().NewContext(r, httptest.NewRecorder()))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, charged)
		}
		// Two wait, in the order they came; bytes given back go to the
		// older first.
		fourth := read()
		synctest.Wait()
		fifth := read()
		synctest.Wait()
		select {
		case err := <-fourth:
			t.Fatalf("a body past the budget did not wait: %v", err)
		case err := <-fifth:
			t.Fatalf("a body past the budget did not wait: %v", err)
		default:
		}
		for i, next := range []chan error{fourth, fifth} {
			s.requestBodies.give(held[i])
			synctest.Wait()
			select {
			case err := <-next:
				if err != nil {
					t.Fatalf("waiting body %d, once bytes were given back: %v", i+1, err)
				}
			default:
				t.Fatalf("waiting body %d was not read once bytes were given back (first come, first served)", i+1)
			}
		}
		var p *apiError
		if err := <-read(); !errors.As(err, &p) || p.status != http.StatusServiceUnavailable {
			t.Errorf("a body whose wait ran out: %v, want 503", err)
		}
	})
}
