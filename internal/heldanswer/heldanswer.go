// Package heldanswer buffers an HTTP answer while the request holds seats
// of the fair queue (internal/seatq), so the seats are released before any
// byte is sent: a client that reads slowly holds a connection, never
// another tenant's turn. Every answer searchd renders is bounded in size.
package heldanswer

import (
	"bytes"
	"net/http"
	"time"
)

// Writer is an http.ResponseWriter that buffers the answer until
// [Writer.Send]; its Header is the real writer's.
type Writer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// New returns a writer that holds the answer meant for w.
func New(w http.ResponseWriter) *Writer { return &Writer{header: w.Header()} }

// Header returns the real writer's header.
func (h *Writer) Header() http.Header { return h.header }

// WriteHeader records the status; the first one stands.
func (h *Writer) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}

// Write holds b.
func (h *Writer) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return h.body.Write(b)
}

// Flush does nothing; Send writes the answer whole.
func (h *Writer) Flush() {}

// Written reports whether a status or a byte was written.
func (h *Writer) Written() bool { return h.status != 0 }

// Bytes returns the length of the body held.
func (h *Writer) Bytes() int { return h.body.Len() }

// SmallAnswer is the largest answer sent without a write deadline: the
// socket's send buffer takes it whole.
const SmallAnswer = 16 << 10

// MinRate is the slowest read rate allowed, in bytes a second; Grace is
// added on top.
const (
	MinRate = 64 << 10
	Grace   = 10 * time.Second
)

// Send writes the held answer to w (the writer given to New) within Grace
// plus the body's size at MinRate; a slower client loses its connection.
func (h *Writer) Send(w http.ResponseWriter) error {
	return h.SendBy(w, time.Now().Add(Grace+time.Duration(h.body.Len())*time.Second/MinRate))
}

// SendBy is Send with the write deadline given.
func (h *Writer) SendBy(w http.ResponseWriter, deadline time.Time) error {
	if !h.Written() {
		return nil
	}
	// A small answer fits the socket buffer, so skip the timer update.
	// Writers that refuse a deadline (test recorders) fall back on the
	// server's WriteTimeout.
	if h.body.Len() > SmallAnswer {
		_ = http.NewResponseController(w).SetWriteDeadline(deadline)
	}
	w.WriteHeader(h.status)
	_, err := w.Write(h.body.Bytes())
	return err
}
