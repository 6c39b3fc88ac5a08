//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
)

// Issue 14.6, the callback attack: strangers post large unsigned callbacks
// at once. Before issue 14.3 each was read whole (8 MiB) before its
// signature was looked at, and 150 of them took the process from 23 MiB to
// 2.7 GiB resident.

// floodRSSCeiling is the documented ceiling (docs/testing.md) on the peak resident
// memory of one `searchd serve` during the callback flood.
const floodRSSCeiling = 256 << 20

// Sizes of the flood: as in issue 14's report.
const (
	floodClients  = 150
	floodBodySize = 8 << 20
	floodDuration = 5 * time.Second
	// floodMinSigned is how many signed deliveries the provider makes
	// during each flood at least: a flood goes on past its duration
	// until it has, on a busy machine, for at most floodMaxDuration.
	floodMinSigned   = 10
	floodMaxDuration = time.Minute
)

// Sizes of the slow forged flood, as in issue 24's report: full-size
// bodies (the default callback limit, declared) with a well-formed forged
// signature, each sent but for its last byte at once and then a byte a
// second. Its duration outlasts the callback body timeout (10s by
// default), so the attack meets it.
const (
	slowClients  = 450
	slowBodySize = 1 << 20
	slowDuration = 15 * time.Second
)

// TestCallbackFloodMemory starts one real `searchd serve`, at its
// defaults, on a throwaway PostgreSQL, and attacks its callbacks twice.
// First, for floodDuration, floodClients clients post 8 MiB callbacks in a
// loop: half unsigned, half with a signature of the right shape that
// matches nothing and a declared length over the callback limit. Then, for
// slowDuration, slowClients connections post forged callbacks of the full
// callback size slowly (slowForgedCallbacks): a signature can only be
// checked once the whole body is in, so each body is held meanwhile.
// Throughout, a provider sends signed deliveries for a registered job, one
// after another. The process's peak resident set (VmHWM) must stay under
// floodRSSCeiling, every signed delivery must be acknowledged with a 200,
// and no attacker may get anything but its 401 or 413 in the first attack,
// or 503 in the second (the budget of bodies awaiting their signature is
// spent, or the body did not arrive within the callback body timeout), or
// a connection the server closed on its unread body.
func TestCallbackFloodMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	dir := workDir(t, "searchd-e2e-flood-")
	bin, pg := standalone(ctx, t, dir, startPostgres)
	rep, err := newReplica("searchd-flood", bin, pg.TCPAddr(), dir, defaultLease)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rep.Kill)
	if err := rep.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rep.mu.Lock()
	pid := rep.proc.Pid()
	rep.mu.Unlock()

	// A job to call back about, registered through the API.
	org := uuid.New()
	token, err := auth.SignToken([]byte(jwtSecret), org, "e2e-flood", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient("flood", token, []*replica{rep}, 0, client.RetryPolicy{}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.StartRun(ctx, client.DirectStart{Kind: "capability", Name: "flood"})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.RegisterProviderJob(ctx, client.RegisterProviderJobParams{RunID: run.Run.ID, Provider: "acme", ProviderJobID: "flood-pj"})
	if err != nil {
		t.Fatal(err)
	}
	path := rep.URL() + "/v1/callbacks/acme/jobs/" + reg.Job.ID

	before, err := memoryOf(pid)
	if err != nil {
		t.Fatal(err)
	}

	big := bytes.Repeat([]byte("x"), floodBodySize)
	forged := "v1," + strings.Repeat("A", 43) + "="
	var (
		stop                     atomic.Bool
		refused, cut, unexpected atomic.Int64
		firstUnexpected          sync.Once
		unexpectedAnswer         string
		wg                       sync.WaitGroup
	)
	attackers := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: floodClients}}
	for i := range floodClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				req, _ := http.NewRequest(http.MethodPost, path, bytes.NewReader(big))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(api.HeaderDeliveryID, fmt.Sprintf("flood-%d-%d", i, n))
				req.Header.Set(api.HeaderTimestamp, strconv.FormatInt(time.Now().Unix(), 10))
				want := http.StatusUnauthorized
				if i%2 == 1 {
					req.Header.Set(api.HeaderSignature, forged)
					want = http.StatusRequestEntityTooLarge
				}
				res, err := attackers.Do(req)
				if err != nil {
					// The server answered before the body and closed the
					// connection on the rest of it.
					cut.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
				res.Body.Close()
				if res.StatusCode == want {
					refused.Add(1)
					continue
				}
				unexpected.Add(1)
				firstUnexpected.Do(func() { unexpectedAnswer = fmt.Sprintf("attacker %d: %d, want %d", i, res.StatusCode, want) })
			}
		}()
	}

	// The well-behaved provider: signed deliveries one after another.
	provider := newSignedProvider(t, path)
	inFlood := provider.deliverFor(t, floodDuration)
	stop.Store(true)
	wg.Wait()
	attackers.CloseIdleConnections()
	mid, err := memoryOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flood: %d clients posting %d-byte callbacks for %s: %d refused with their 401/413, %d cut by the server, %d unexpected",
		floodClients, floodBodySize, floodDuration, refused.Load(), cut.Load(), unexpected.Load())
	t.Logf("searchd peak resident memory after the flood: %d MiB", mid.hwm>>20)
	if n := unexpected.Load(); n > 0 {
		t.Errorf("%d attacker requests got an unexpected answer, first %s", n, unexpectedAnswer)
	}
	// A flood that never reached the handler would prove nothing.
	if refused.Load()+cut.Load() < floodClients {
		t.Errorf("only %d flood requests completed, want at least one per client (%d)", refused.Load()+cut.Load(), floodClients)
	}

	// The slow forged flood, the provider still delivering.
	slow := startSlowForgedCallbacks(rep.addr, "/v1/callbacks/acme/jobs/"+reg.Job.ID)
	inSlowFlood := provider.deliverFor(t, slowDuration)
	slow.stop()
	t.Logf("slow forged flood: %d connections posting %d-byte callbacks a byte a second for %s: %d answered 503, %d cut by the server, %d unexpected",
		slowClients, slowBodySize, slowDuration, slow.refused.Load(), slow.cut.Load(), slow.unexpected.Load())
	if n := slow.unexpected.Load(); n > 0 {
		t.Errorf("%d slow forged callbacks got an unexpected answer, first %s", n, slow.firstUnexpected())
	}
	if slow.refused.Load() < slowClients {
		t.Errorf("only %d slow forged callbacks were refused with 503, want at least one per connection (%d): "+
			"neither the budget nor the body timeout turned them away", slow.refused.Load(), slowClients)
	}

	after, err := memoryOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("searchd (pid %d) peak resident memory: %d MiB before the floods, %d MiB after the first, %d MiB after both (VmHWM; VmRSS now %d MiB), ceiling %d MiB",
		pid, before.hwm>>20, mid.hwm>>20, after.hwm>>20, after.rss>>20, floodRSSCeiling>>20)
	t.Logf("signed provider meanwhile: %d acknowledged with 200, %d not; latency median %s, max %s",
		provider.ok, provider.failed, median(provider.latencies), maxOf(provider.latencies))
	if after.hwm > floodRSSCeiling {
		t.Errorf("peak resident memory %d MiB during the callback floods, want under %d MiB", after.hwm>>20, floodRSSCeiling>>20)
	}
	// Every signed delivery must be acknowledged, and each flood must
	// have met floodMinSigned of them: on a busy machine, where a
	// delivery takes seconds, a flood lasts until it has (deliverFor).
	if provider.failed > 0 || inFlood < floodMinSigned || inSlowFlood < floodMinSigned {
		t.Errorf("signed deliveries during the floods: %d acknowledged (%d in the first, %d in the slow one), %d not (%v); "+
			"want every one acknowledged, at least %d in each", provider.ok, inFlood, inSlowFlood, provider.failed, provider.failures, floodMinSigned)
	}
	if rep.Exited() {
		t.Errorf("searchd exited during the flood:\n%s", tail(rep.logPath))
	}
}

// signedProvider is the well-behaved provider of the flood: it sends
// signed deliveries for one job, one after another, and counts what they
// were answered.
type signedProvider struct {
	path      string
	wh        *standardwebhooks.Webhook
	client    *http.Client
	n         int
	ok        int
	failed    int
	failures  []string
	latencies []time.Duration
}

func newSignedProvider(t *testing.T, path string) *signedProvider {
	t.Helper()
	wh, err := standardwebhooks.NewWebhookRaw([]byte(providerSecret))
	if err != nil {
		t.Fatal(err)
	}
	return &signedProvider{path: path, wh: wh, client: &http.Client{Timeout: 10 * time.Second}}
}

// deliverFor sends signed deliveries for d, 20 ms apart, and returns how
// many were acknowledged with 200. On a busy machine it goes on past d
// until floodMinSigned deliveries were made, for at most
// floodMaxDuration: the check is of every delivery during a flood, not of
// how many a slow machine fits in d.
func (p *signedProvider) deliverFor(t *testing.T, d time.Duration) int {
	t.Helper()
	before, made := p.ok, 0
	deadline, last := time.Now().Add(d), time.Now().Add(floodMaxDuration)
	for ; time.Now().Before(last) && (time.Now().Before(deadline) || made < floodMinSigned); p.n, made = p.n+1, made+1 {
		body, _ := json.Marshal(map[string]any{"job_id": "flood-pj", "status": "running", "result": map[string]any{"n": p.n}})
		id := fmt.Sprintf("good-%d", p.n)
		ts := time.Now()
		sig, err := p.wh.Sign(id, ts, body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, p.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.HeaderDeliveryID, id)
		req.Header.Set(api.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set(api.HeaderSignature, sig)
		res, err := p.client.Do(req)
		p.latencies = append(p.latencies, time.Since(ts))
		if err != nil {
			p.failed++
			p.failures = append(p.failures, err.Error())
			continue
		}
		answer, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			p.failed++
			p.failures = append(p.failures, fmt.Sprintf("%d %s", res.StatusCode, answer))
			continue
		}
		p.ok++
		time.Sleep(20 * time.Millisecond)
	}
	return p.ok - before
}

// slowFlood is the slow forged flood: slowClients connections, each
// posting a forged callback of slowBodySize declared bytes, sending all
// but its last 4 KiB at once and then a byte a second, and starting over
// on a new connection once the server has answered or closed the last one.
type slowFlood struct {
	done                     atomic.Bool
	wg                       sync.WaitGroup
	refused, cut, unexpected atomic.Int64
	mu                       sync.Mutex
	unexpectedAnswer         string
}

func startSlowForgedCallbacks(addr, path string) *slowFlood {
	f := &slowFlood{}
	// All but the last 4 KiB at once: at a byte a second the body would
	// be complete in more than an hour.
	body := bytes.Repeat([]byte("x"), slowBodySize-4<<10)
	forged := "v1," + strings.Repeat("A", 43) + "="
	for i := range slowClients {
		f.wg.Go(func() {
			for n := 0; !f.done.Load(); n++ {
				status, err := f.post(addr, path, fmt.Sprintf("slow-%d-%d", i, n), forged, body)
				switch {
				case err != nil:
					f.cut.Add(1)
				case status == http.StatusServiceUnavailable:
					f.refused.Add(1)
				default:
					f.unexpected.Add(1)
					f.mu.Lock()
					if f.unexpectedAnswer == "" {
						f.unexpectedAnswer = fmt.Sprintf("connection %d: %d, want 503", i, status)
					}
					f.mu.Unlock()
				}
			}
		})
	}
	return f
}

// post sends one slow forged callback on a connection of its own and
// returns the status the server answered, or an error when it closed the
// connection without an answer (or the flood stopped first).
func (f *slowFlood) post(addr, path, id, sig string, body []byte) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		time.Sleep(100 * time.Millisecond)
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(slowDuration + 30*time.Second))
	answered := make(chan int, 1)
	go func() {
		defer close(answered)
		if res, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
			answered <- res.StatusCode
		}
	}()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"%s: %s\r\n%s: %d\r\n%s: %s\r\nContent-Length: %d\r\n\r\n",
		path, addr, api.HeaderDeliveryID, id, api.HeaderTimestamp, time.Now().Unix(), api.HeaderSignature, sig, slowBodySize)
	if _, err := io.WriteString(conn, head); err == nil {
		if _, err := conn.Write(body); err == nil {
			// Then a byte a second.
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
		trickle:
			for !f.done.Load() {
				select {
				case status, ok := <-answered:
					if ok {
						return status, nil
					}
					return 0, io.ErrUnexpectedEOF
				case <-tick.C:
					if _, err := conn.Write([]byte("x")); err != nil {
						break trickle
					}
				}
			}
		}
	}
	if f.done.Load() {
		_ = conn.Close()
	}
	if status, ok := <-answered; ok {
		return status, nil
	}
	return 0, io.ErrUnexpectedEOF
}

// stop ends the flood and waits for its connections to close.
func (f *slowFlood) stop() {
	f.done.Store(true)
	f.wg.Wait()
}

func (f *slowFlood) firstUnexpected() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unexpectedAnswer
}

// memory is what /proc/<pid>/status says of a process's resident set.
type memory struct{ hwm, rss int64 }

// memoryOf reads VmHWM (the peak resident set) and VmRSS of pid, in bytes.
func memoryOf(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for line := range strings.SplitSeq(string(b), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("/proc/%d/status: %s: %w", pid, line, err)
		}
		if name == "VmHWM" {
			m.hwm = kb << 10
		} else {
			m.rss = kb << 10
		}
	}
	if m.hwm == 0 {
		return memory{}, fmt.Errorf("/proc/%d/status has no VmHWM", pid)
	}
	return m, nil
}

// median returns the middle of ds (zero when empty).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

// maxOf returns the largest of ds (zero when empty).
func maxOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds).Round(time.Millisecond)
}
