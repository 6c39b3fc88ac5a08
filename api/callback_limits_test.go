package api_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/providerjobs"
)

// Issue 14.3: a callback is cheap to refuse. Anyone can post one, so its
// body has a limit of its own, and everything that can be decided from the
// path and the headers is decided before a byte of the body is read.

// paddedCallback returns a callback body about providerJobID of exactly n
// bytes: a running status whose result holds a string padded to fit.
func paddedCallback(t *testing.T, providerJobID string, n int) []byte {
	t.Helper()
	empty := callbackBody(providerJobID, "running", map[string]any{"pad": ""})
	if len(empty) > n {
		t.Fatalf("a callback body cannot be %d bytes: the smallest is %d", n, len(empty))
	}
	body := callbackBody(providerJobID, "running", map[string]any{"pad": strings.Repeat("x", n-len(empty))})
	if len(body) != n {
		t.Fatalf("padded callback body is %d bytes, want %d", len(body), n)
	}
	return body
}

// wellShapedSignature is a webhook-signature that passes every check of
// its shape and matches no body: "v1," and the base64 of 32 bytes.
var wellShapedSignature = "v1," + strings.Repeat("A", 43) + "="

// TestCallbackBodyLimitIsItsOwn proves the callback limit, apart from the
// limit of the other routes: a signed body of exactly the limit is
// accepted and one byte more is 413 payload_too_large, whether its length
// is declared (refused before a byte is read) or not (refused having read
// at most the limit and one byte, which is all http.MaxBytesReader asks
// for). Both with a limit set and with the default of 1 MiB, while the
// other routes keep their 8 MiB.
func TestCallbackBodyLimitIsItsOwn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		set   int64 // Deps.CallbackMaxBodyBytes
		limit int
	}{
		{"set to 4 KiB", 4096, 4096},
		{"default", 0, api.DefaultCallbackMaxBodyBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{deps: func(d *api.Deps) { d.CallbackMaxBodyBytes = tc.set }})
			job := b.seedJob("job-limit")

			at := delivery{jobID: pathOf(job), deliveryID: "d-at-limit", body: paddedCallback(t, job.ProviderJobID, tc.limit)}
			if status, _ := b.callback(at).answer(t); status != "accepted" {
				t.Errorf("a signed callback of exactly the limit (%d bytes) = %s, want accepted", tc.limit, status)
			}

			over := delivery{jobID: pathOf(job), deliveryID: "d-over-limit", body: paddedCallback(t, job.ProviderJobID, tc.limit+1)}
			res := b.callback(over)
			if res.status != http.StatusRequestEntityTooLarge || res.problem(t).Code != api.CodePayloadTooLarge {
				t.Errorf("a signed callback of the limit and one byte (%d) = %d %s, want 413 payload_too_large",
					tc.limit+1, res.status, res.body)
			}

			// Unknown length, never ending, with a signature of the right
			// shape: the body must be read to be verified, up to the limit.
			rq := b.callbackReq(delivery{jobID: pathOf(job), deliveryID: "d-endless", signature: wellShapedSignature})
			body := &endless{prefix: []byte(`{"job_id": "`)}
			hr := httptest.NewRequest(http.MethodPost, rq.path, body)
			hr.ContentLength = -1
			for k, v := range rq.header {
				hr.Header.Set(k, v)
			}
			rec := serve(t, b.api.Handler(), hr)
			if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), api.CodePayloadTooLarge) {
				t.Errorf("an endless callback body = %d %s, want 413 payload_too_large", rec.Code, rec.Body)
			}
			if n := body.n.Load(); n > int64(tc.limit)+1 {
				t.Errorf("the server read %d bytes of an endless callback body, want at most the limit and one (%d)", n, tc.limit+1)
			}

			// The other routes keep their own limit: a body over the
			// callback limit is no problem there.
			if tc.set == 0 {
				name := strings.Repeat("n", 10)
				big := map[string]any{"name": name, "brief": map[string]any{"query": "q", "pad": strings.Repeat("x", tc.limit)},
					"baseline": map[string]any{"items": []string{}}}
				if res := b.do(req{method: http.MethodPost, path: "/v1/saved-searches", body: big}); res.status == http.StatusRequestEntityTooLarge {
					t.Errorf("a %d-byte saved search = 413: the callback limit leaked to another route", tc.limit)
				}
			}

			// The delivery at the limit, none of the refused ones.
			b.wantCount(t, 1, `SELECT count(*) FROM agent.provider_inbox`)
			b.wantCount(t, 0, `SELECT count(*) FROM agent.webhook_drops`)
		})
	}
}

// TestCallbackLimitCannotExceedTheBodyLimit: the callback limit is a
// tighter bound inside the general one, never a way around it.
func TestCallbackLimitCannotExceedTheBodyLimit(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	st := newStores(pool, nil)
	for _, tc := range []struct{ body, callback int64 }{{2048, 4096}, {0, api.DefaultMaxBodyBytes + 1}, {0, -1}} {
		d := st.deps(t, providerjobs.Config{})
		d.MaxBodyBytes, d.CallbackMaxBodyBytes = tc.body, tc.callback
		_, err := api.New(d)
		if err == nil || !strings.Contains(err.Error(), "Deps.CallbackMaxBodyBytes") {
			t.Errorf("api.New with MaxBodyBytes %d, CallbackMaxBodyBytes %d = %v, want an error naming CallbackMaxBodyBytes",
				tc.body, tc.callback, err)
		}
	}
}

// refusedBeforeTheBody lists callbacks whose path or headers alone refuse
// them: each must be answered without reading a byte of the body.
func refusedBeforeTheBody(jobPath string) []struct {
	name     string
	d        delivery
	status   int
	code     string
	multiSig bool
} {
	valid := func(d delivery) delivery {
		if d.jobID == "" {
			d.jobID = jobPath
		}
		if d.deliveryID == "" {
			d.deliveryID = "d-refused"
		}
		return d
	}
	return []struct {
		name     string
		d        delivery
		status   int
		code     string
		multiSig bool
	}{
		{"unknown provider", valid(delivery{provider: "nobody", signature: wellShapedSignature}), 401, "unauthorized", false},
		{"no signature", valid(delivery{signature: "-"}), 401, "unauthorized", false},
		{"signature not base64", valid(delivery{signature: "v1,not*base64!"}), 401, "unauthorized", false},
		{"signature of 31 bytes", valid(delivery{signature: "v1," + strings.Repeat("A", 40) + "=="}), 401, "unauthorized", false},
		{"only another version", valid(delivery{signature: "v1a," + strings.Repeat("A", 43) + "="}), 401, "unauthorized", false},
		{"no comma", valid(delivery{signature: "v1" + strings.Repeat("A", 43) + "="}), 401, "unauthorized", false},
		{"two signature headers", valid(delivery{signature: wellShapedSignature}), 401, "unauthorized", true},
		{"no timestamp", valid(delivery{signature: wellShapedSignature, timestamp: "-"}), 401, "unauthorized", false},
		{"stale timestamp", valid(delivery{signature: wellShapedSignature, at: time.Now().Add(-time.Hour)}), 401, "unauthorized", false},
		{"no delivery id", delivery{jobID: jobPath, signature: wellShapedSignature}, 400, "missing_delivery_id", false},
	}
}

// TestCallbackRefusedWithoutReadingTheBody sends every callback the path
// or the headers refuse with a body that counts what is read of it and
// never ends: each is answered with its 4xx having read nothing.
func TestCallbackRefusedWithoutReadingTheBody(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	job := b.seedJob("job-refused")
	h := b.api.Handler()
	for _, tc := range refusedBeforeTheBody(pathOf(job)) {
		t.Run(tc.name, func(t *testing.T) {
			rq := b.callbackReq(tc.d)
			body := &endless{prefix: []byte(`{"job_id": "`)}
			hr := httptest.NewRequest(http.MethodPost, rq.path, body)
			hr.ContentLength = -1
			hr.Header.Set("Content-Type", "application/json")
			for k, v := range rq.header {
				hr.Header.Set(k, v)
			}
			if tc.multiSig {
				hr.Header.Add(api.HeaderSignature, wellShapedSignature)
			}
			rec := serve(t, h, hr)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), `"`+tc.code+`"`) {
				t.Errorf("callback = %d %s, want %d %s", rec.Code, rec.Body, tc.status, tc.code)
			}
			if n := body.n.Load(); n != 0 {
				t.Errorf("the server read %d bytes of the body of a callback it refuses on its headers, want 0", n)
			}
		})
	}
	b.wantCount(t, 0, `SELECT count(*) FROM agent.provider_inbox`)
}

// TestRefusingAnUnsignedCallbackCostsNothingLikeItsBody measures the heap
// a refusal allocates: an unsigned 8 MiB callback, one from an unknown
// provider, and a well-shaped forgery whose declared length is over the
// limit each cost a few KiB, not 8 MiB. Not parallel: the heap counters
// are the process's, and the parallel tests only run once this one ends.
func TestRefusingAnUnsignedCallbackCostsNothingLikeItsBody(t *testing.T) {
	b := setup(t, setupOpts{})
	job := b.seedJob("job-heap")
	h := b.api.Handler()
	const bodySize = 8 << 20
	big := bytes.Repeat([]byte("x"), bodySize)
	for _, tc := range []struct {
		name string
		d    delivery
		want int
	}{
		{"unsigned", delivery{jobID: pathOf(job), deliveryID: "d-heap", signature: "-"}, http.StatusUnauthorized},
		{"unknown provider", delivery{provider: "nobody", jobID: pathOf(job), deliveryID: "d-heap", signature: wellShapedSignature}, http.StatusUnauthorized},
		{"malformed signature", delivery{jobID: pathOf(job), deliveryID: "d-heap", signature: "v1,@@@@"}, http.StatusUnauthorized},
		{"forged, declared over the limit", delivery{jobID: pathOf(job), deliveryID: "d-heap", signature: wellShapedSignature}, http.StatusRequestEntityTooLarge},
	} {
		rq := b.callbackReq(tc.d)
		request := func() *http.Request {
			hr := httptest.NewRequest(http.MethodPost, rq.path, bytes.NewReader(big))
			hr.Header.Set("Content-Type", "application/json")
			for k, v := range rq.header {
				hr.Header.Set(k, v)
			}
			return hr
		}
		if rec := serve(t, h, request()); rec.Code != tc.want {
			t.Fatalf("%s: callback = %d %s, want %d", tc.name, rec.Code, rec.Body, tc.want)
		}
		const runs = 20
		allocs := testing.AllocsPerRun(runs, func() {
			h.ServeHTTP(httptest.NewRecorder(), request())
		})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range runs {
			h.ServeHTTP(httptest.NewRecorder(), request())
		}
		runtime.ReadMemStats(&after)
		perRequest := (after.TotalAlloc - before.TotalAlloc) / runs
		// The request, its recorder, the answer and the access log: a few
		// KiB. Anything proportional to the body would be megabytes.
		const ceiling = 64 << 10
		if perRequest > ceiling {
			t.Errorf("%s: refusing an %d-byte callback allocates %d bytes a request, want at most %d", tc.name, bodySize, perRequest, ceiling)
		}
		t.Logf("%s: %d-byte body refused with %d allocations, %d bytes a request (%.5f of the body)",
			tc.name, bodySize, int(allocs), perRequest, float64(perRequest)/bodySize)
	}
}
