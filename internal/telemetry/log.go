package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Names of the attributes [NewLogHandler] adds to a log line.
const (
	LogKeyRequestID = "request_id"
	LogKeyTraceID   = "trace_id"
	LogKeySpanID    = "span_id"
)

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id ctx carries, or "" for none.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

type logHandler struct{ next slog.Handler }

// NewLogHandler wraps h to add the context's request id and, when traced,
// its trace_id and span_id to every record. A record's own request_id
// wins. Wrapping twice returns the handler unchanged.
func NewLogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{next: h}
}

// Enabled implements slog.Handler.
func (h logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	id := RequestID(ctx)
	sc := trace.SpanContextFromContext(ctx)
	if id == "" && !sc.IsValid() {
		return h.next.Handle(ctx, r)
	}
	if id != "" && hasAttr(r, LogKeyRequestID) {
		id = ""
	}
	// A record shares its attributes with its copies: add to a clone.
	r = r.Clone()
	if id != "" {
		r.AddAttrs(slog.String(LogKeyRequestID, id))
	}
	if sc.IsValid() {
		r.AddAttrs(slog.String(LogKeyTraceID, sc.TraceID().String()), slog.String(LogKeySpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler; the ids land inside the group too.
func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{next: h.next.WithGroup(name)}
}

// hasAttr reports whether r has a top-level attribute named key.
func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}
