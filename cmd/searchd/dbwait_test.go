package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// TestDBWaitSettings: the answer timeout defaults to 20 s, 0s turns it
// off, and a bad value is refused naming its setting.
func TestDBWaitSettings(t *testing.T) {
	t.Parallel()
	h := newHarness(map[string]string{})
	fs := h.app.flagSet("serve", serveCommand)
	for _, tt := range []struct {
		value   string
		want    time.Duration
		problem string
	}{
		{"", 20 * time.Second, ""},
		{"0s", 0, ""},
		{"3s", 3 * time.Second, ""},
		{"later", 20 * time.Second, envDBAnswerTimeout + `: "later" is not a duration`},
		{"500ms", 20 * time.Second, envDBAnswerTimeout + ": 500ms is out of range"},
		{"2h", 20 * time.Second, envDBAnswerTimeout + ": 2h0m0s is out of range"},
	} {
		env := map[string]string{envDBAnswerTimeout: tt.value,
			envDatabaseURL: "postgres://searchd@localhost:5432/searchd", envJWTSecret: goodSecret}
		cfg, problems := loadSettings(fs, func(k string) string { return env[k] }, cmdServe)
		msg := strings.Join(problems, "\n")
		if cfg.DBAnswerTimeout != tt.want || (tt.problem == "") != (len(problems) == 0) || !strings.Contains(msg, tt.problem) {
			t.Errorf("%s=%q: %s, %q; want %s, %q", envDBAnswerTimeout, tt.value, cfg.DBAnswerTimeout, msg, tt.want, tt.problem)
		}
	}
}

// TestServePoolWaitsAtMostTheAnswerTimeout: the pool serve opens cuts a
// statement the database does not answer within SEARCHD_DB_ANSWER_TIMEOUT,
// with the tracing tracer set too, and answers the error as a 503 would.
func TestServePoolWaitsAtMostTheAnswerTimeout(t *testing.T) {
	t.Parallel()
	cfg := serverConfig{DatabaseURL: pgtest.NewDBURL(t), DBAnswerTimeout: 500 * time.Millisecond}
	traced := false
	pool, err := openPool(context.Background(), cfg, func(pc *pgxpool.Config) {
		traced = true
		pc.ConnConfig.Tracer = nopTracer{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if !traced {
		t.Errorf("the prepare functions did not run")
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
