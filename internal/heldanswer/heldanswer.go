// Package heldanswer holds an HTTP answer in memory while a request holds
// seats of the admission queue (internal/fairq), so that the seats go back
// before a byte goes to the client: a client that reads its answer slowly,
// or not at all (pipelining requests it never reads), holds a connection
// and a goroutine, never another tenant's turn.
//
// Every answer searchd renders is bounded in bytes (lists, whole records
// and console pages are), so holding one whole costs memory the seat it
// was rendered under already stood for.
package heldanswer

import (
	"bytes"
	"net/http"
	"time"
)

// Writer is an http.ResponseWriter that holds what is written to it. Its
// Header is the real writer's: nothing reaches the client before
// [Writer.Send]. It is not safe for concurrent use, as no ResponseWriter
// is.
type Writer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// New returns a writer that holds the answer meant for w.
func New(w http.ResponseWriter) *Writer { return &Writer{header: w.Header()} }

// Header returns the header of the answer: the real writer's own.
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

// Flush does nothing: the answer goes whole, by Send.
func (h *Writer) Flush() {}

// Written reports whether anything was written: a status or a byte.
func (h *Writer) Written() bool { return h.status != 0 }

// Bytes returns the length of the body held.
func (h *Writer) Bytes() int { return h.body.Len() }

// SmallAnswer is the largest answer written without a deadline of its
// own: the socket's send buffer takes it whole.
const SmallAnswer = 16 << 10

// MinRate is the slowest a client may read an answer, in bytes a second;
// Grace is the time it is given on top.
const (
	MinRate = 64 << 10
	Grace   = 10 * time.Second
)

// Send writes the held answer, if any, to w, the writer New was given,
// within a write deadline of Grace plus the body at MinRate: a client that
// reads slower loses its connection. It returns the error of the write.
func (h *Writer) Send(w http.ResponseWriter) error {
	return h.SendBy(w, time.Now().Add(Grace+time.Duration(h.body.Len())*time.Second/MinRate))
}

// SendBy is Send with the write deadline given.
func (h *Writer) SendBy(w http.ResponseWriter, deadline time.Time) error {
	if !h.Written() {
		return nil
	}
	// An answer the socket's buffers take is written at once, whoever
	// reads it: no deadline (setting one costs every small answer a
	// timer's update). Not every writer can take one (a test's recorder
	// cannot): the server's WriteTimeout still bounds the answer then.
	if h.body.Len() > SmallAnswer {
		_ = http.NewResponseController(w).SetWriteDeadline(deadline)
	}
	w.WriteHeader(h.status)
	_, err := w.Write(h.body.Bytes())
	return err
}
