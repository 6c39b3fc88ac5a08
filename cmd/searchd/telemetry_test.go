package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestTracingConfigFromTheOTELVariables(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		env      map[string]string
		on       bool
		endpoint string
		service  string
		err      string // a part of the usage error; "" for none
	}{
		{name: "nothing set", env: nil},
		{name: "base endpoint", env: map[string]string{envOTelEndpoint: "http://collector:4318"},
			on: true, endpoint: "http://collector:4318/v1/traces"},
		{name: "base endpoint with a path", env: map[string]string{envOTelEndpoint: "https://otel.example/prefix/"},
			on: true, endpoint: "https://otel.example/prefix/v1/traces"},
		{name: "traces endpoint as is, over the base", env: map[string]string{
			envOTelEndpoint: "http://base:4318", envOTelTracesEndpoint: "http://traces:4318/custom"},
			on: true, endpoint: "http://traces:4318/custom"},
		{name: "service name", env: map[string]string{envOTelEndpoint: "http://c:4318", envOTelServiceName: "search-eu"},
			on: true, endpoint: "http://c:4318/v1/traces", service: "search-eu"},
		{name: "explicit otlp over http/protobuf", env: map[string]string{envOTelEndpoint: "http://c:4318",
			envOTelTracesExporter: "otlp", envOTelProtocol: "http/protobuf"}, on: true, endpoint: "http://c:4318/v1/traces"},
		{name: "SDK disabled", env: map[string]string{envOTelEndpoint: "http://c:4318", envOTelSDKDisabled: "TRUE"}},
		{name: "SDK not disabled", env: map[string]string{envOTelEndpoint: "http://c:4318", envOTelSDKDisabled: "false"},
			on: true, endpoint: "http://c:4318/v1/traces"},
		{name: "exporter none", env: map[string]string{envOTelEndpoint: "http://c:4318", envOTelTracesExporter: "none"}},
		{name: "another exporter", env: map[string]string{envOTelEndpoint: "http://c:4318", envOTelTracesExporter: "zipkin"},
			err: envOTelTracesExporter + `: "zipkin" is not an exporter`},
		{name: "grpc", env: map[string]string{envOTelEndpoint: "http://c:4317", envOTelProtocol: "grpc"},
			err: envOTelProtocol + `: "grpc" is not supported`},
		{name: "grpc for traces alone", env: map[string]string{envOTelEndpoint: "http://c:4317", envOTelTracesProtocol: "grpc"},
			err: envOTelTracesProtocol + `: "grpc" is not supported`},
		{name: "not a URL", env: map[string]string{envOTelEndpoint: "collector:4318"},
			err: envOTelEndpoint + `: "collector:4318" is not an http:// or https:// URL`},
		{name: "no host", env: map[string]string{envOTelTracesEndpoint: "http:///v1/traces"},
			err: envOTelTracesEndpoint + `: "http:///v1/traces" is not`},
	} {
		cfg, on, err := tracingConfig(func(k string) string { return tt.env[k] })
		var uerr *usageError
		switch {
		case tt.err != "":
			if !errors.As(err, &uerr) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: tracingConfig = %v, want a usage error with %q", tt.name, err, tt.err)
			}
		case err != nil:
			t.Errorf("%s: tracingConfig: %v", tt.name, err)
		case on != tt.on || cfg.EndpointURL != tt.endpoint || cfg.ServiceName != tt.service:
			t.Errorf("%s: tracingConfig = %+v, on %v; want endpoint %q, service %q, on %v",
				tt.name, cfg, on, tt.endpoint, tt.service, tt.on)
		}
	}
}

func TestServeRefusesAnUnusableOTELSetting(t *testing.T) {
	t.Parallel()
	h := newHarness(map[string]string{
		"DATABASE_URL":       "postgres://searchd@localhost:5432/searchd",
		"SEARCHD_JWT_SECRET": goodSecret,
		envOTelEndpoint:      "http://c:4317",
		envOTelProtocol:      "grpc",
	})
	if code := h.run("serve"); code != 2 || !strings.Contains(h.stderr.String(), envOTelProtocol) {
		t.Errorf("serve with %s=grpc = %d %q, want 2 naming the variable", envOTelProtocol, code, h.stderr.String())
	}
}

// collector is a fake OTLP/HTTP trace collector: it keeps what it is sent.
type collector struct {
	*httptest.Server
	mu      sync.Mutex
	exports [][]byte
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			c.mu.Lock()
			c.exports = append(c.exports, body)
			c.mu.Unlock()
		}
	}))
	t.Cleanup(c.Close)
	return c
}

// received returns everything exported so far, concatenated.
func (c *collector) received() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.exports, nil)
}

// TestServeTracesAndMeasuresWhenConfigured runs serve as an operator would,
// with an OTLP endpoint: its requests and their SQL are exported as spans
// by the time it stops, /metrics counts them and shows the pool, and the
// log lines name the request and its trace.
func TestServeTracesAndMeasuresWhenConfigured(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	h := newHarness(map[string]string{
		"DATABASE_URL":       pgtest.NewDBURL(t),
		"SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_ADDR":       "127.0.0.1:0",
		envOTelEndpoint:      col.URL,
		envOTelServiceName:   "searchd-under-test",
	})
	addr, stop := h.start(t, "serve")
	base := "http://" + addr

	tok, err := auth.SignToken([]byte(goodSecret), uuid.New(), "tester", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	res := post(t, base+"/v1/runs", tok, "k1", `{"kind": "capability", "name": "c"}`)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/runs = %d, want 201", res.StatusCode)
	}
	reqID := res.Header.Get("X-Request-Id")

	page := getText(t, base+"/metrics")
	for _, want := range []string{
		`searchd_http_requests_total{method="POST",route="/v1/runs",status="201"} 1`,
		"searchd_db_pool_max_conns ",
		"searchd_db_pool_acquires_total ",
		// The build, so a dashboard tells which build each replica runs.
		`searchd_build_info{commit="` + buildInfo().Commit + `",goversion="` + runtime.Version() + `",version="` + buildInfo().Version + `"} 1`,
	} {
		if !strings.Contains(page, "\n"+want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, h.stderr.String())
	}
	// Stopping flushed the batched spans: the request's, its statements'.
	got := col.received()
	for _, want := range []string{"POST /v1/runs", "INSERT", "INSERT INTO agent.runs", "searchd-under-test", reqID} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("the exported spans lack %q", want)
		}
	}

	var traced bool
	for _, line := range strings.Split(h.stderr.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["request_id"] != reqID {
			continue
		}
		// OTLP's protobuf carries the 16 bytes the log spells in hex.
		id, _ := hex.DecodeString(fmt.Sprint(m["trace_id"]))
		if len(id) == 16 && bytes.Contains(got, id) {
			traced = true
		}
	}
	if !traced {
		t.Errorf("no log line of request %s names a trace the collector received: %s", reqID, h.stderr.String())
	}
}

// TestVersionPrintsTheBuild: searchd version names the version of the
// repository's VERSION file, the commit (stamped by make build and the
// image, else recorded by the toolchain) and the Go version.
func TestVersionPrintsTheBuild(t *testing.T) {
	// Not parallel: it stamps the package's commit.
	file, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(nil)
	if code := h.run("version"); code != 0 {
		t.Fatalf("version = %d: %s", code, h.stderr.String())
	}
	b := buildInfo()
	want := "searchd " + strings.TrimSpace(string(file)) + " (commit " + b.Commit + ", " + runtime.Version() + ")\n"
	if got := h.stdout.String(); got != want || b.Commit == "" {
		t.Errorf("version printed %q, want %q", got, want)
	}
	commit = "abc123"
	defer func() { commit = "" }()
	if b := buildInfo(); b.Commit != "abc123" {
		t.Errorf("stamped build = %+v, want commit abc123", b)
	}
}
