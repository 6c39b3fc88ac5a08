package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/pgtest"
)

// TestDBWaitSettings: the client-side bounds default to 5 s and 20 s, a
// connect_timeout in DATABASE_URL stands when the setting is unset, and
// every bad value is refused naming its setting.
func TestDBWaitSettings(t *testing.T) {
	t.Parallel()
	h := newHarness(map[string]string{})
	fs := h.app.flagSet("serve")
	serverFlags(fs)
	none := func(string) string { return "" }
	if w, problems := readDBWaitSettings(fs, none, "postgres://u@h/db"); len(problems) != 0 ||
		w != (dbWait{Connect: 5 * time.Second, Answer: 20 * time.Second}) {
		t.Errorf("defaults = %+v (%v), want 5s and 20s", w, problems)
	}
	if w, _ := readDBWaitSettings(fs, none, "postgres://u@h/db?connect_timeout=9"); w.Connect != 0 {
		t.Errorf("with connect_timeout in the URL, Connect = %s, want 0 (the URL's stands)", w.Connect)
	}
	set := map[string]string{EnvDBConnectTimeout: "2s", EnvDBAnswerTimeout: "0s"}
	if w, problems := readDBWaitSettings(fs, func(k string) string { return set[k] }, "postgres://u@h/db?connect_timeout=9"); len(problems) != 0 ||
		w != (dbWait{Connect: 2 * time.Second}) {
		t.Errorf("set = %+v (%v), want 2s and none", w, problems)
	}
	bad := map[string]string{EnvDBConnectTimeout: "0s", EnvDBAnswerTimeout: "later"}
	_, problems := readDBWaitSettings(fs, func(k string) string { return bad[k] }, "")
	if msg := strings.Join(problems, "\n"); len(problems) != 2 || !strings.Contains(msg, EnvDBConnectTimeout+": 0s is out of range") ||
		!strings.Contains(msg, EnvDBAnswerTimeout+`: "later" is not a duration`) {
		t.Errorf("problems = %q, want one per setting, naming it", msg)
	}
}

// TestServePoolWaitsAtMostTheAnswerTimeout: the pool serve opens cuts a
// statement the database does not answer within SEARCHD_DB_ANSWER_TIMEOUT,
// with the tracing tracer set too, and answers the error as a 503 would.
func TestServePoolWaitsAtMostTheAnswerTimeout(t *testing.T) {
	t.Parallel()
	cfg := serverConfig{DatabaseURL: pgtest.NewDBURL(t), DBWait: dbWait{Connect: time.Second, Answer: 500 * time.Millisecond}}
	traced := false
	pool, err := openPool(context.Background(), cfg, func(pc *pgxpool.Config) {
		traced = true
		pc.ConnConfig.Tracer = nopTracer{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if pool.Config().ConnConfig.ConnectTimeout != time.Second || !traced {
		t.Errorf("ConnectTimeout = %s (prepared %v), want 1s", pool.Config().ConnConfig.ConnectTimeout, traced)
	}
	start := time.Now()
	_, err = pool.Exec(context.Background(), "SELECT pg_sleep(20)")
	if took := time.Since(start); err == nil || took > 5*time.Second {
		t.Errorf("pg_sleep(20) = %v after %s, want cut at the 500 ms answer timeout", err, took)
	}
	if _, err := pool.Exec(context.Background(), "SELECT pg_sleep(0.1)"); err != nil {
		t.Errorf("a statement within the answer timeout = %v", err)
	}
}

// nopTracer stands for the tracing tracer the deadline joins.
type nopTracer struct{}

func (nopTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (nopTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
