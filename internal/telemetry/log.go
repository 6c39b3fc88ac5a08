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

// logHandler adds the request id of the context, and its trace and span
// ids when the request is traced, to every record it handles.
type logHandler struct{ next slog.Handler }

// NewLogHandler returns h adding to every record logged with a context
// the request id [WithRequestID] put there, and the trace_id and span_id
// of the context's span when it has one. A record that names a
// request_id itself keeps its own. Wrapping a handler NewLogHandler
// returned returns it unchanged, so no line carries an id twice.
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

// WithGroup implements slog.Handler. The ids of a record logged through
// the group are in the group too.
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
