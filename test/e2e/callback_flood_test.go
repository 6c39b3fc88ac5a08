//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/searchd/searchd/client"
)

// Issue 14.6, the callback attack: strangers post large unsigned callbacks
// at once. Before issue 14.3 each was read whole (8 MiB) before its
// signature was looked at, and 150 of them took the process from 23 MiB to
// 2.7 GiB resident.

// floodRSSCeiling is the documented ceiling (README) on the peak resident
// memory of one `searchd serve` during the callback flood.
const floodRSSCeiling = 256 << 20

// Sizes of the flood: as in issue 14's report.
const (
	floodClients  = 150
	floodBodySize = 8 << 20
	floodDuration = 5 * time.Second
	// floodMinSigned is how many signed deliveries the provider makes
	// during the flood at least: the flood goes on past floodDuration
	// until it has, on a busy machine, for at most floodMaxDuration.
	floodMinSigned   = 10
	floodMaxDuration = time.Minute
)

// TestCallbackFloodMemory starts one real `searchd serve` on a throwaway
// PostgreSQL, and for floodDuration has floodClients clients post 8 MiB
// callbacks in a loop: half unsigned, half with a signature of the right
// shape that matches nothing and a declared length over the callback
// limit. Meanwhile a provider sends signed deliveries for a registered
// job, one after another. The process's peak resident set (VmHWM) must stay
// under floodRSSCeiling, every signed delivery must be acknowledged with a
// 200, and no attacker may get anything but its 401 or 413 (or a
// connection the server closed on its unread body).
func TestCallbackFloodMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "searchd-e2e-flood-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var pg *postgres
	var rep *replica
	t.Cleanup(func() {
		if rep != nil {
			rep.Kill()
		}
		if pg != nil {
			pg.Stop()
		}
		if os.Getenv("SEARCHD_E2E_KEEP") == "1" {
			t.Logf("kept %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	bin, err := buildSearchd(ctx, dir, false) // never -race: its shadow memory would be measured
	if err != nil {
		t.Fatal(err)
	}
	if pg, err = startPostgres(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, bin, pg.URL(dbName)); err != nil {
		t.Fatal(err)
	}
	if rep, err = newReplica("searchd-flood", bin, pg.TCPAddr(), dir, defaultLease); err != nil {
		t.Fatal(err)
	}
	if err := rep.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rep.mu.Lock()
	pid := rep.proc.Pid()
	rep.mu.Unlock()

	// A job to call back about, registered through the API.
	org := uuid.New()
	token, err := api.SignToken([]byte(jwtSecret), org, "e2e-flood", time.Now(), time.Hour)
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
	wh, err := standardwebhooks.NewWebhookRaw([]byte(providerSecret))
	if err != nil {
		t.Fatal(err)
	}
	provider := &http.Client{Timeout: 10 * time.Second}
	var signedOK, signedFailed int
	var failures []string
	var latencies []time.Duration
	// The flood lasts floodDuration, and on a busy machine until the
	// provider has made its minimum of deliveries meanwhile, at most
	// floodMaxDuration: the check is of every delivery during the flood,
	// not of how many a slow machine fits in 5 s.
	deadline, last := time.Now().Add(floodDuration), time.Now().Add(floodMaxDuration)
	for n := 0; time.Now().Before(last) && (time.Now().Before(deadline) || n < floodMinSigned); n++ {
		body, _ := json.Marshal(map[string]any{"job_id": "flood-pj", "status": "running", "result": map[string]any{"n": n}})
		id := fmt.Sprintf("good-%d", n)
		ts := time.Now()
		sig, err := wh.Sign(id, ts, body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.HeaderDeliveryID, id)
		req.Header.Set(api.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set(api.HeaderSignature, sig)
		res, err := provider.Do(req)
		latencies = append(latencies, time.Since(ts))
		if err != nil {
			signedFailed++
			failures = append(failures, err.Error())
			continue
		}
		answer, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			signedFailed++
			failures = append(failures, fmt.Sprintf("%d %s", res.StatusCode, answer))
			continue
		}
		signedOK++
		time.Sleep(20 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	attackers.CloseIdleConnections()

	after, err := memoryOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("searchd (pid %d) peak resident memory: %d MiB before the flood, %d MiB after (VmHWM; VmRSS now %d MiB), ceiling %d MiB",
		pid, before.hwm>>20, after.hwm>>20, after.rss>>20, floodRSSCeiling>>20)
	t.Logf("flood: %d clients posting %d-byte callbacks for %s: %d refused with their 401/413, %d cut by the server, %d unexpected",
		floodClients, floodBodySize, floodDuration, refused.Load(), cut.Load(), unexpected.Load())
	t.Logf("signed provider meanwhile: %d acknowledged with 200, %d not; latency median %s, max %s",
		signedOK, signedFailed, median(latencies), maxOf(latencies))
	if after.hwm > floodRSSCeiling {
		t.Errorf("peak resident memory %d MiB during the callback flood, want under %d MiB", after.hwm>>20, floodRSSCeiling>>20)
	}
	if signedFailed > 0 || signedOK < floodMinSigned {
		t.Errorf("signed deliveries during the flood: %d acknowledged, %d not (%v); want at least %d and every one acknowledged",
			signedOK, signedFailed, failures, floodMinSigned)
	}
	if n := unexpected.Load(); n > 0 {
		t.Errorf("%d attacker requests got an unexpected answer, first %s", n, unexpectedAnswer)
	}
	// A flood that never reached the handler would prove nothing.
	if refused.Load()+cut.Load() < floodClients {
		t.Errorf("only %d flood requests completed, want at least one per client (%d)", refused.Load()+cut.Load(), floodClients)
	}
	if rep.Exited() {
		t.Errorf("searchd exited during the flood:\n%s", tail(rep.logPath))
	}
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
