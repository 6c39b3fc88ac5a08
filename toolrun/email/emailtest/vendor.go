// Package emailtest runs a local email vendor for tests: an HTTP server on
// the loopback interface that speaks the API package email calls, records
// every request it receives and every message it sends, and, like a real
// vendor that honours idempotency keys, answers a repeated Idempotency-Key
// with the first request's answer instead of sending again.
package emailtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Options configure a [Vendor].
type Options struct {
	// Idempotent makes the vendor dedupe requests by their Idempotency-Key
	// header. False: it ignores the header and sends every request.
	Idempotent bool
	// Delay is how long the vendor takes to send, before it answers.
	Delay time.Duration
}

// Step scripts the vendor's handling of one request. The zero Step is the
// vendor's ordinary handling.
type Step struct {
	// Status, when set, answers the request with this status and an error
	// body, without sending.
	Status int
	// SendThenHang sends the message as usual and then never answers, until
	// the client gives up: the lost acknowledgement.
	SendThenHang bool
}

// Request is one request the vendor received.
type Request struct {
	IdempotencyKey string
	Authorization  string
	Body           []byte
}

// Message is one message the vendor sent.
type Message struct {
	ID             string
	IdempotencyKey string
	To             string
	Subject        string
	Body           string
}

// Vendor is a running local vendor. Its methods are safe for concurrent use.
type Vendor struct {
	opts   Options
	server *httptest.Server
	// closing ends every hanging request when the test ends.
	closing chan struct{}

	mu       sync.Mutex
	script   []Step
	requests []Request
	messages []Message
	// byKey holds the first answer for each Idempotency-Key.
	byKey map[string]sent
}

type sent struct {
	body []byte // the request body, to refuse a key reused for another
	id   string
}

// NewVendor starts a vendor on a loopback port and stops it when t ends.
func NewVendor(t testing.TB, opts Options) *Vendor {
	t.Helper()
	v := &Vendor{opts: opts, closing: make(chan struct{}), byKey: map[string]sent{}}
	v.server = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(func() {
		close(v.closing)
		v.server.Close()
	})
	return v
}

// URL returns the vendor's base URL, for email.Config.BaseURL.
func (v *Vendor) URL() string { return v.server.URL }

// Script queues steps for the next requests, one per request, in order.
func (v *Vendor) Script(steps ...Step) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.script = append(v.script, steps...)
}

// Requests returns every request received so far, in order.
func (v *Vendor) Requests() []Request {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Request(nil), v.requests...)
}

// Messages returns every message sent so far, in order.
func (v *Vendor) Messages() []Message {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Message(nil), v.messages...)
}

func (v *Vendor) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		answer(w, http.StatusNotFound, map[string]string{"error": "no such endpoint"})
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		answer(w, http.StatusBadRequest, map[string]string{"error": "unreadable body"})
		return
	}
	key := r.Header.Get("Idempotency-Key")

	v.mu.Lock()
	v.requests = append(v.requests, Request{IdempotencyKey: key, Authorization: r.Header.Get("Authorization"), Body: body})
	var step Step
	if len(v.script) > 0 {
		step, v.script = v.script[0], v.script[1:]
	}
	v.mu.Unlock()

	if step.Status != 0 {
		answer(w, step.Status, map[string]string{"error": http.StatusText(step.Status)})
		return
	}
	if v.opts.Delay > 0 {
		time.Sleep(v.opts.Delay)
	}
	status, reply := v.send(key, body)
	if step.SendThenHang {
		select {
		case <-r.Context().Done():
		case <-v.closing:
		}
		return
	}
	answer(w, status, reply)
}

// send sends the message body describes, or replays the answer its key
// already has.
func (v *Vendor) send(key string, body []byte) (int, any) {
	var in struct{ To, Subject, Body string }
	if err := json.Unmarshal(body, &in); err != nil {
		return http.StatusBadRequest, map[string]string{"error": "body is not JSON"}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	dedupe := v.opts.Idempotent && key != ""
	if prev, ok := v.byKey[key]; dedupe && ok {
		if !bytes.Equal(prev.body, body) {
			return http.StatusUnprocessableEntity, map[string]string{"error": "Idempotency-Key reused for a different request"}
		}
		return http.StatusCreated, map[string]string{"id": prev.id}
	}
	id := fmt.Sprintf("msg_%d", len(v.messages)+1)
	v.messages = append(v.messages, Message{ID: id, IdempotencyKey: key, To: in.To, Subject: in.Subject, Body: in.Body})
	if dedupe {
		v.byKey[key] = sent{body: body, id: id}
	}
	return http.StatusCreated, map[string]string{"id": id}
}

func answer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
