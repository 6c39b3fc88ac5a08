// Package runstream serves one Run's events as Server-Sent Events, for
// GET /v1/runs/{id}/events (package api) and the console's Run page.
//
// The Run row is event seq 1 and agent.run_status_changes holds the rest.
// A stream sends the events after Last-Event-ID, then polls the Run's
// version every [Config.Poll] until the Run finishes, the client leaves,
// [Config.MaxDuration] passes or [Hub.Close] is called. At most
// [Config.MaxStreams] are open per process. A stream holds no fair-queue
// seat while it waits; its caller takes one for the first read only.
package runstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/runs"
)

// Defaults of [Config].
const (
	DefaultMaxStreams  = 1000
	DefaultPoll        = time.Second
	DefaultHeartbeat   = 15 * time.Second
	DefaultMaxDuration = 15 * time.Minute
	// MaxMaxStreams bounds [Config.MaxStreams].
	MaxMaxStreams = 100000
	// Retry is the SSE retry: delay sent to the client.
	Retry = 2 * time.Second
	// writeTimeout bounds each write; a stalled client ends the stream.
	writeTimeout = 10 * time.Second
)

// Config bounds the streams of a process.
type Config struct {
	// MaxStreams is the most streams open at once; 0 is
	// [DefaultMaxStreams].
	MaxStreams int
	// Poll is how often a stream looks up its Run's version; 0 is
	// [DefaultPoll].
	Poll time.Duration
	// Heartbeat is how often a stream with nothing to say sends a comment
	// line, so proxies keep the connection open; 0 is [DefaultHeartbeat].
	Heartbeat time.Duration
	// MaxDuration is the longest a stream lasts; the client reconnects
	// with Last-Event-ID. 0 is [DefaultMaxDuration].
	MaxDuration time.Duration
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	c.MaxStreams = cmp.Or(c.MaxStreams, DefaultMaxStreams)
	c.Poll = cmp.Or(c.Poll, DefaultPoll)
	c.Heartbeat = cmp.Or(c.Heartbeat, DefaultHeartbeat)
	c.MaxDuration = cmp.Or(c.MaxDuration, DefaultMaxDuration)
	return c
}

// Validate returns an error naming the first field out of range, with its
// defaults: "runstream: Config.F is V; it must be R".
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.MaxStreams < 1 || c.MaxStreams > MaxMaxStreams:
		return fmt.Errorf("runstream: Config.MaxStreams is %d; it must be from 1 to %d", c.MaxStreams, MaxMaxStreams)
	case c.Poll < 100*time.Millisecond || c.Poll > time.Minute:
		return fmt.Errorf("runstream: Config.Poll is %s; it must be from 100ms to 1m0s", c.Poll)
	case c.Heartbeat < 0:
		return fmt.Errorf("runstream: Config.Heartbeat is %s; it must not be negative", c.Heartbeat)
	case c.MaxDuration <= 0 || c.MaxDuration > 24*time.Hour:
		return fmt.Errorf("runstream: Config.MaxDuration is %s; it must be more than 0s and at most 24h0m0s", c.MaxDuration)
	}
	return nil
}

// Source reads a Run's version and events; a *runs.Store is one.
type Source interface {
	Version(ctx context.Context, org, id uuid.UUID) (int64, string, error)
	Events(ctx context.Context, org, id uuid.UUID, after int64) ([]runs.Event, error)
}

// ErrFull is [Hub.Open]'s refusal: MaxStreams streams are open.
var ErrFull = errors.New("runstream: every stream of this server is taken")

// ErrClosed is [Hub.Open]'s refusal after [Hub.Close].
var ErrClosed = errors.New("runstream: the server is shutting down")

// Hub bounds and ends a process's streams. It is safe for concurrent use.
type Hub struct {
	cfg    Config
	src    Source
	log    *slog.Logger
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
}

// New returns a hub of cfg's streams reading src; nil log discards. It
// returns cfg's validation error.
func New(cfg Config, src Source, log *slog.Logger) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, errors.New("runstream: the Source is required")
	}
	cfg = cfg.WithDefaults()
	return &Hub{cfg: cfg, src: src, log: cmp.Or(log, slog.New(slog.DiscardHandler)),
		slots: make(chan struct{}, cfg.MaxStreams), closed: make(chan struct{})}, nil
}

// Open reserves a stream; the caller calls release when the stream ends.
// It returns [ErrFull] when MaxStreams are open and [ErrClosed] after
// [Hub.Close].
func (h *Hub) Open() (release func(), err error) {
	select {
	case <-h.closed:
		return nil, ErrClosed
	default:
	}
	select {
	case h.slots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-h.slots }) }, nil
	default:
		return nil, ErrFull
	}
}

// Streams returns how many streams are open.
func (h *Hub) Streams() int { return len(h.slots) }

// Close ends every stream at its next step and refuses new ones, so
// shutdown need not wait MaxDuration; clients reconnect with Last-Event-ID.
func (h *Hub) Close() { h.once.Do(func() { close(h.closed) }) }

// ParseLastEventID reads a Last-Event-ID: "" is 0 (from the start), else a
// decimal seq from 0 to 2^63-1. ok is false for any other value.
func ParseLastEventID(v string) (seq int64, ok bool) {
	if v == "" {
		return 0, true
	}
	// ParseUint takes no sign; 63 bits is int64's range.
	n, err := strconv.ParseUint(v, 10, 63)
	return int64(n), err == nil
}

// Stream is what [Hub.Begin] read for a stream's start.
type Stream struct {
	org, id uuid.UUID
	// last is the seq of the last event sent (or the reader's
	// Last-Event-ID); pending the events after it, to send first.
	last    int64
	pending []runs.Event
	// done: the Run has finished and pending holds (or the reader has)
	// its last event.
	done bool
}

// Done reports whether the Run finished and the reader has its last
// event; answer 204 so an EventSource does not reconnect.
func (s *Stream) Done() bool { return s.done && len(s.pending) == 0 }

// Begin reads the events of Run id of org after seq after. It returns
// runs.ErrNotFound when org has no Run id. Call it while holding a seat.
func (h *Hub) Begin(ctx context.Context, org, id uuid.UUID, after int64) (*Stream, error) {
	version, status, err := h.src.Version(ctx, org, id)
	if err != nil {
		return nil, err
	}
	s := &Stream{org: org, id: id, last: after, done: runs.Terminal(status)}
	if version > after {
		if s.pending, err = h.src.Events(ctx, org, id, after); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Serve writes s to w as text/event-stream (each event's data a
// runs.Event in JSON, a keep-alive comment every Heartbeat) until the Run
// finishes, the request ends, MaxDuration passes, a write times out or
// the hub closes. It writes the 200 itself.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, s *Stream) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	// nginx buffers answers unless told not to.
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The server's read timeout would cancel the request mid-stream;
	// clear it and bound each write instead. A writer that cannot keeps
	// the server's timeouts and the client reconnects.
	_ = rc.SetReadDeadline(time.Time{})
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(fmt.Appendf(nil, "retry: %d\n\n", Retry.Milliseconds())) {
		return
	}
	send := func(events []runs.Event) bool {
		for _, e := range events {
			if e.Seq <= s.last {
				continue
			}
			data, err := json.Marshal(e)
			if err != nil {
				return false
			}
			if !write(fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data)) {
				return false
			}
			s.last = e.Seq
			if e.Terminal() {
				s.done = true
			}
		}
		return true
	}
	if !send(s.pending) || s.done {
		return
	}
	s.pending = nil
	poll, beat := time.NewTicker(h.cfg.Poll), time.NewTicker(h.cfg.Heartbeat)
	defer poll.Stop()
	defer beat.Stop()
	end := time.NewTimer(h.cfg.MaxDuration)
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.closed:
			return
		case <-end.C:
			return
		case <-beat.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case <-poll.C:
			events, err := h.changes(ctx, s)
			switch {
			case errors.Is(err, runs.ErrNotFound):
				// The Run is gone (swept): nothing more will come.
				return
			case err != nil:
				if ctx.Err() == nil {
					h.log.LogAttrs(ctx, slog.LevelWarn, "runstream: poll failed; retrying at the next",
						slog.String("run_id", s.id.String()), slog.String("error", err.Error()))
				}
				continue
			}
			if !send(events) || s.done {
				return
			}
		}
	}
}

// changes reads the events after s.last only when the Run's version moved.
func (h *Hub) changes(ctx context.Context, s *Stream) ([]runs.Event, error) {
	version, _, err := h.src.Version(ctx, s.org, s.id)
	if err != nil || version <= s.last {
		return nil, err
	}
	return h.src.Events(ctx, s.org, s.id, s.last)
}
