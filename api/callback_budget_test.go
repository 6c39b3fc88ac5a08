package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/api"
)

// Issue 24.1: a forged callback of full size, sent slowly. Its signature
// can only be checked once its whole body is in, so until then it holds
// the server's memory; hundreds of them took a server from 27 to 487 MiB.
// Bodies awaiting their signature share a budget, and each must arrive
// within a deadline of its own.

// slowCallback is a callback sent on a connection of its own that
// declares length bytes, sends sent of them and then nothing.
type slowCallback struct {
	conn   net.Conn
	answer chan *http.Response
}

func startSlowCallback(t *testing.T, addr string, rq req, length, sent int) *slowCallback {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", rq.path, addr, length)
	for k, v := range rq.header {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()+strings.Repeat("x", sent)); err != nil {
		t.Fatal(err)
	}
	s := &slowCallback{conn: conn, answer: make(chan *http.Response, 1)}
	go func() {
		defer close(s.answer)
		if res, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
			s.answer <- res
		}
	}()
	return s
}

// waitHeld waits until the budget has given out want bytes.
func waitHeld(t *testing.T, s *api.Server, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for api.CallbackBodiesHeld(s) != want {
		if time.Now().After(deadline) {
			t.Fatalf("callback bodies hold %d bytes of the budget, want %d", api.CallbackBodiesHeld(s), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestForgedSlowCallbacksAreBoundedAndAProviderStillGetsIn fills the
// large bodies' share of the budget with two forged callbacks of the full
// size that stop sending halfway. A third is refused at once, 503 with
// Retry-After and the connection closed, having read nothing of its body;
// a signed delivery over 64 KiB is refused alike; a provider's small
// signed delivery still gets in, on the quarter of the budget kept for
// small bodies. At the body timeout the two slow senders are answered 503
// and give their share back, and a signed delivery of the full size is
// accepted again.
func TestForgedSlowCallbacksAreBoundedAndAProviderStillGetsIn(t *testing.T) {
	t.Parallel()
	const limit, timeout = 256 << 10, 2 * time.Second
	b := setup(t, setupOpts{deps: func(d *api.Deps) {
		// Large bodies share three quarters, 2.25 limits: two bodies of
		// the limit fit, not three, nor one of 100 KiB beside them.
		d.CallbackMaxBodyBytes, d.CallbackBodyBudget, d.CallbackBodyTimeout = limit, 3*limit, timeout
	}})
	job := b.seedJob("job-budget")
	addr := b.server.Listener.Addr().String()
	forged := func(id string) req {
		return b.callbackReq(delivery{jobID: pathOf(job), deliveryID: id, signature: wellShapedSignature})
	}
	slow := []*slowCallback{
		startSlowCallback(t, addr, forged("d-slow-1"), limit, limit/2),
		startSlowCallback(t, addr, forged("d-slow-2"), limit, limit/2),
	}
	waitHeld(t, b.api, 2*(limit+1))

	rq := forged("d-third")
	body := &endless{prefix: []byte(`{"job_id": "`)}
	hr := httptest.NewRequest(http.MethodPost, rq.path, body)
	hr.ContentLength = limit
	for k, v := range rq.header {
		hr.Header.Set(k, v)
	}
	rec := serve(t, b.api.Handler(), hr)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"`+api.CodeUnavailable+`"`) ||
		rec.Header().Get("Retry-After") == "" || rec.Header().Get("Connection") != "close" {
		t.Errorf("a third forged callback of the full size = %d %v %s, want 503 unavailable with Retry-After, closing the connection",
			rec.Code, rec.Header(), rec.Body)
	}
	if n := body.n.Load(); n != 0 {
		t.Errorf("the server read %d bytes of a body the budget refused, want none", n)
	}
	big := delivery{jobID: pathOf(job), deliveryID: "d-big", body: paddedCallback(t, job.ProviderJobID, 100<<10)}
	if res := b.callback(big); res.status != http.StatusServiceUnavailable || res.problem(t).Code != api.CodeUnavailable {
		t.Errorf("a signed 100 KiB delivery while large bodies hold their share = %d %s, want 503 unavailable", res.status, res.body)
	}
	small := delivery{jobID: pathOf(job), deliveryID: "d-small", body: callbackBody(job.ProviderJobID, "running", map[string]any{"n": 1})}
	if status, _ := b.callback(small).answer(t); status != "accepted" {
		t.Errorf("a provider's small signed delivery while forged ones hold the budget = %s, want accepted", status)
	}

	for i, s := range slow {
		res, ok := <-s.answer
		if !ok {
			t.Fatalf("slow callback %d: the connection ended without an answer", i)
		}
		answer, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(answer), "did not arrive within "+timeout.String()) {
			t.Errorf("slow callback %d = %d %s, want 503: the body did not arrive within %s", i, res.StatusCode, answer, timeout)
		}
		if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || secs < 1 {
			t.Errorf("slow callback %d: Retry-After %q, want whole seconds", i, res.Header.Get("Retry-After"))
		}
	}
	waitHeld(t, b.api, 0)
	full := delivery{jobID: pathOf(job), deliveryID: "d-full", body: paddedCallback(t, job.ProviderJobID, limit)}
	if status, _ := b.callback(full).answer(t); status != "accepted" {
		t.Errorf("a signed delivery of the full size once the slow ones are cut = %s, want accepted", status)
	}
}

// TestCallbackBudgetMustHoldTwoBodiesOfTheLimit: a budget that could not
// hold a body of the callback limit beside the quarter kept for small
// ones is a configuration error.
func TestCallbackBudgetMustHoldTwoBodiesOfTheLimit(t *testing.T) {
	t.Parallel()
	var base api.Deps
	setup(t, setupOpts{deps: func(d *api.Deps) { base = *d }})
	base.Verifier = testVerifier(t, base.Now) // setup sets it after deps
	for _, d := range []api.Deps{
		{CallbackMaxBodyBytes: 1 << 20, CallbackBodyBudget: 2<<20 - 1},
		{CallbackBodyBudget: -1},
		{CallbackBodyTimeout: -time.Second},
	} {
		full := base
		full.CallbackMaxBodyBytes, full.CallbackBodyBudget, full.CallbackBodyTimeout = d.CallbackMaxBodyBytes, d.CallbackBodyBudget, d.CallbackBodyTimeout
		if _, err := api.New(full); err == nil || !strings.Contains(err.Error(), "Deps.CallbackBody") {
			t.Errorf("api.New with budget %d, timeout %s = %v, want an error naming the setting", d.CallbackBodyBudget, d.CallbackBodyTimeout, err)
		}
	}
}
