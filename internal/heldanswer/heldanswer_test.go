package heldanswer_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/internal/heldanswer"
)

// TestTheAnswerIsHeldThenSent: nothing reaches the client until Send; the
// status, the headers and the body then arrive as written.
func TestTheAnswerIsHeldThenSent(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	h := heldanswer.New(rec)
	h.Header().Set("X-Kind", "held")
	h.WriteHeader(http.StatusCreated)
	h.WriteHeader(http.StatusTeapot) // the first stands
	_, _ = io.WriteString(h, "hello ")
	h.Flush()
	_, _ = io.WriteString(h, "world")
	if rec.Body.Len() != 0 || rec.Code != http.StatusOK || rec.Flushed {
		t.Fatalf("before Send the client got %d %q (flushed %v)", rec.Code, rec.Body, rec.Flushed)
	}
	if err := h.Send(rec); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusCreated || rec.Body.String() != "hello world" || rec.Header().Get("X-Kind") != "held" {
		t.Errorf("sent %d %q %v", rec.Code, rec.Body, rec.Header())
	}
}

// TestAClientThatDoesNotReadLosesItsConnection: an answer larger than
// the socket's buffers, to a client that never reads, ends at the write
// deadline (here 2 s; Send's is Grace plus the body at MinRate) with an
// error.
func TestAClientThatDoesNotReadLosesItsConnection(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 8<<20) // past any socket buffer
	sent := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := heldanswer.New(w)
		_, _ = io.WriteString(h, body)
		start := time.Now()
		err := h.SendBy(w, time.Now().Add(2*time.Second))
		if err == nil {
			t.Errorf("Send to a client that does not read returned no error after %s", time.Since(start))
		}
		sent <- err
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Read the status line only, then nothing more.
	if _, err := bufio.NewReaderSize(conn, 64).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sent:
	case <-time.After(30 * time.Second):
		t.Fatal("Send still writing to a client that does not read, past its deadline")
	}
}
