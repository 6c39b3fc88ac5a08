package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// The phases of one request, measured inside the server: how long its
// handler ran before answering, and how much of that it spent waiting for
// a pool connection and inside statements. Both servers are wrapped alike
// (timed), and their pools carry a phaseTracer, so a slow request can be
// split: time outside the handler (the connection, the HTTP server, the
// load generator, and every wait for a CPU on the way), the pool, SQL, and
// the rest of the handler (for the real one, its seat among it).
//
// The server sends them back in a Server-Timing header (the W3C header
// for exactly this), which the load generator reads for slow requests
// only.

// phases is what a request's context carries; every field is nanoseconds,
// atomic because pgx may trace from whatever goroutine runs a statement.
type phases struct {
	start                  time.Time
	acquire, sql           atomic.Int64
	acquireStart, sqlStart atomic.Int64 // since start
}

type phasesKey struct{}

func phasesOf(ctx context.Context) *phases {
	p, _ := ctx.Value(phasesKey{}).(*phases)
	return p
}

func (p *phases) since() int64 { return int64(time.Since(p.start)) }

// timed wraps h so that each request's phases are measured and sent in
// Server-Timing: handler (its handler's time until the answer's header),
// acquire and sql, in milliseconds.
func timed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &phases{start: time.Now()}
		h.ServeHTTP(&timingWriter{ResponseWriter: w, p: p}, r.WithContext(context.WithValue(r.Context(), phasesKey{}, p)))
	})
}

// timingWriter adds the Server-Timing header as the answer's header goes.
type timingWriter struct {
	http.ResponseWriter
	p     *phases
	wrote bool
}

func (w *timingWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		b := make([]byte, 0, 64)
		b = append(b, "handler;dur="...)
		b = strconv.AppendFloat(b, float64(w.p.since())/1e6, 'f', 3, 64)
		b = append(b, ", acquire;dur="...)
		b = strconv.AppendFloat(b, float64(w.p.acquire.Load())/1e6, 'f', 3, 64)
		b = append(b, ", sql;dur="...)
		b = strconv.AppendFloat(b, float64(w.p.sql.Load())/1e6, 'f', 3, 64)
		w.Header().Set("Server-Timing", string(b))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *timingWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *timingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serverTiming is a parsed Server-Timing header of timed.
type serverTiming struct{ handler, acquire, sql time.Duration }

// parseServerTiming reads the header timed writes; ok is false when it is
// absent or not timed's.
func parseServerTiming(h string) (st serverTiming, ok bool) {
	n := 0
	for part := range strings.SplitSeq(h, ",") {
		name, dur, found := strings.Cut(strings.TrimSpace(part), ";dur=")
		v, err := strconv.ParseFloat(dur, 64)
		if !found || err != nil {
			return serverTiming{}, false
		}
		d := time.Duration(v * 1e6)
		switch name {
		case "handler":
			st.handler = d
		case "acquire":
			st.acquire = d
		case "sql":
			st.sql = d
		default:
			return serverTiming{}, false
		}
		n++
	}
	return st, n == 3
}

// phaseTracer is the pools' tracer: the statement counter (pgtest.Tracer)
// plus the phases of the request whose context a statement or an acquire
// runs in. It implements pgxpool.AcquireTracer, which pgxpool finds on
// ConnConfig.Tracer.
type phaseTracer struct{ *pgtest.Tracer }

var (
	_ pgx.QueryTracer                     = phaseTracer{}
	_ pgx.BatchTracer                     = phaseTracer{}
	_ pgxpool.AcquireTracer               = phaseTracer{}
	_ interface{ Counts() pgtest.Counts } = phaseTracer{}
)

func (t phaseTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if p := phasesOf(ctx); p != nil {
		p.sqlStart.Store(p.since())
	}
	return t.Tracer.TraceQueryStart(ctx, conn, d)
}

func (t phaseTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	if p := phasesOf(ctx); p != nil {
		p.sql.Add(p.since() - p.sqlStart.Load())
	}
	t.Tracer.TraceQueryEnd(ctx, conn, d)
}

func (t phaseTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if p := phasesOf(ctx); p != nil {
		p.sqlStart.Store(p.since())
	}
	return t.Tracer.TraceBatchStart(ctx, conn, d)
}

func (t phaseTracer) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchEndData) {
	if p := phasesOf(ctx); p != nil {
		p.sql.Add(p.since() - p.sqlStart.Load())
	}
	t.Tracer.TraceBatchEnd(ctx, conn, d)
}

func (t phaseTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	if p := phasesOf(ctx); p != nil {
		p.acquireStart.Store(p.since())
	}
	return ctx
}

func (t phaseTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	if p := phasesOf(ctx); p != nil {
		p.acquire.Add(p.since() - p.acquireStart.Load())
	}
}

// slowRequest is a request slower than slowThreshold: when it was sent
// (since its round began), how long it took as the load generator saw it,
// and its server's phases (ok false when the answer carried none).
type slowRequest struct {
	at, latency time.Duration
	server      serverTiming
	ok          bool
}

// slowSummary describes a round's slow requests in one line: how many,
// in how many bursts (a burst being requests sent less than 50 ms apart),
// their latency, and where it went: the medians of the handler's time (of
// which the pool's and SQL's) and of the time outside the handler.
func slowSummary(slow []slowRequest) string {
	if len(slow) == 0 {
		return "no request ≥ " + msShort(slowThreshold)
	}
	slices.SortFunc(slow, func(a, b slowRequest) int { return cmp.Compare(a.at, b.at) })
	bursts := 1
	for i := 1; i < len(slow); i++ {
		if slow[i].at-slow[i-1].at > 50*time.Millisecond {
			bursts++
		}
	}
	med := func(f func(slowRequest) time.Duration) string {
		var xs []time.Duration
		for _, s := range slow {
			if s.ok {
				xs = append(xs, f(s))
			}
		}
		if len(xs) == 0 {
			return "n/a"
		}
		slices.Sort(xs)
		return msShort(xs[len(xs)/2])
	}
	return fmt.Sprintf("%d requests ≥ %s in %d bursts (sent %.1f–%.1f s into the round), median %s: "+
		"in the handler %s (pool acquire %s, SQL %s), outside it %s",
		len(slow), msShort(slowThreshold), bursts, slow[0].at.Seconds(), slow[len(slow)-1].at.Seconds(),
		med(func(s slowRequest) time.Duration { return s.latency }), med(func(s slowRequest) time.Duration { return s.server.handler }),
		med(func(s slowRequest) time.Duration { return s.server.acquire }), med(func(s slowRequest) time.Duration { return s.server.sql }),
		med(func(s slowRequest) time.Duration { return s.latency - s.server.handler }))
}
