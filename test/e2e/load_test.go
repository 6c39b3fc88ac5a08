//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/searchd/searchd/client"
)

// loadPolicy is the retry policy of every load client: the real client,
// tuned the way an application that shares keys between callers would
// tune it.
//   - MaxRetryAfter is short: searchd's Retry-After on in_progress is the
//     time left on the holder's lease, up to 30 s, while a healthy holder
//     ends in milliseconds; the client's documentation says to cap it lower
//     to poll sooner, at the cost of more attempts.
//   - AttemptTimeout is short, so an attempt stuck on a stopped replica is
//     abandoned and the retry goes to the next replica; but not shorter
//     than a healthy start takes on a busy machine (two CPU hogs beside
//     the suite, where reconnecting after the network faults takes
//     seconds): attempts that all time out would never finish a call.
//   - MaxAttempts is high: the call's deadline, not the count, ends it.
var loadPolicy = client.RetryPolicy{
	MaxAttempts:    10000,
	BaseDelay:      50 * time.Millisecond,
	MaxDelay:       time.Second,
	MaxRetryAfter:  500 * time.Millisecond,
	AttemptTimeout: 10 * time.Second,
}

// attempt is one HTTP attempt as a client saw it.
type attempt struct {
	at      time.Time // when the answer (or the failure) came
	sent    time.Time // when the request was sent
	client  string
	replica string
	key     string
	status  int    // 0 when no answer came
	code    string // the problem code of an answer other than 2xx
	failure string // the transport error when no answer came
}

// recorder collects the attempts of every client of a scenario.
type recorder struct {
	mu       sync.Mutex
	attempts []attempt
}

func (r *recorder) add(a attempt) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
}

func (r *recorder) all() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]attempt(nil), r.attempts...)
}

// balancer is the client-side load balancer of one client: an
// http.RoundTripper that sends each attempt to the next replica in turn,
// so a retry after a failure goes elsewhere, and records how it ended.
type balancer struct {
	who     string // the client's name in the record
	targets []*replica
	next    atomic.Uint64
	base    http.RoundTripper
	rec     *recorder
}

func (b *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	r := b.targets[int(b.next.Add(1)-1)%len(b.targets)]
	out := req.Clone(req.Context())
	out.URL.Host, out.Host = r.addr, r.addr
	a := attempt{sent: time.Now(), client: b.who, replica: r.name, key: req.Header.Get("Idempotency-Key")}
	res, err := b.base.RoundTrip(out)
	if err != nil {
		a.at, a.failure = time.Now(), err.Error()
		b.rec.add(a)
		return nil, err
	}
	a.status = res.StatusCode
	if res.StatusCode >= 300 {
		// Read the problem here to learn its code; the client gets the
		// same bytes.
		body, rerr := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			a.failure = rerr.Error()
		}
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(body, &p)
		a.code = p.Code
	}
	a.at = time.Now()
	b.rec.add(a)
	return res, nil
}

// newClient returns the client named who that balances over targets,
// starting at the replica of index first, and records its attempts in rec.
func newClient(who, token string, targets []*replica, first int, policy client.RetryPolicy, rec *recorder) (*client.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	b := &balancer{who: who, targets: targets, base: tr, rec: rec}
	b.next.Store(uint64(first))
	// The host is a placeholder: the balancer names the replica.
	return client.New("http://searchd.e2e", client.Options{
		HTTPClient: &http.Client{Transport: b},
		Token:      token,
		Retry:      policy,
		UserAgent:  "searchd-e2e",
	})
}

// call is one logical start as a client saw it: every attempt it made
// ended in this result.
type call struct {
	key      string
	client   string
	start    time.Time
	end      time.Time
	deadline time.Time
	// pinned marks the start a probe sent to one replica it then broke; it
	// is held to the invariants on its answer, not to finishing.
	pinned     bool
	runID      string
	snapshotID string // from the answer's snapshot
	runSnap    string // the answer's run.snapshot_id
	created    bool
	err        error
}

// keySpec is what every start of one key sends.
type keySpec struct {
	savedSearch string
	opts        client.StartOptions
}

// loadGroup is the clients that share keys: they start each key together
// (with a few milliseconds of jitter), so every key is contended, and move
// to the next one when all of them have an answer.
type loadGroup struct {
	id      int
	clients []*client.Client
	names   []string
}

// drive runs the group until stop is set, at most maxKeys keys. Each key is
// registered with s before any client sends it.
func (g *loadGroup) drive(ctx context.Context, s *scenarioRun, stop *atomic.Bool) {
	for i := 0; i < maxKeysPerGroup && !stop.Load() && ctx.Err() == nil; i++ {
		key := fmt.Sprintf("%s-g%02d-%05d", s.name, g.id, i)
		spec := s.register(key, i+g.id)
		var wg sync.WaitGroup
		for m, c := range g.clients {
			wg.Go(func() {
				time.Sleep(rand.N(5 * time.Millisecond))
				s.start(ctx, c, g.names[m], key, spec, false)
			})
		}
		wg.Wait()
	}
}

// driveGroups starts the load of s on load: clients/perKey groups of
// perKey clients each (see config), spread over the replicas, each group
// driving its keys until stop is set. It fails the test when a client
// cannot be made.
func (s *scenarioRun) driveGroups(ctx context.Context, load *sync.WaitGroup, stop *atomic.Bool) {
	cfg := s.h.cfg
	for g := range max(1, cfg.clients/cfg.perKey) {
		lg := &loadGroup{id: g}
		for m := range cfg.perKey {
			who := fmt.Sprintf("g%02d.%d", g, m)
			c, err := newClient(who, s.token, s.h.replicas, g+m, loadPolicy, s.rec)
			if err != nil {
				s.t.Fatal(err)
			}
			lg.clients = append(lg.clients, c)
			lg.names = append(lg.names, who)
		}
		load.Go(func() { lg.drive(ctx, s, stop) })
	}
}

// maxKeysPerGroup bounds the keys one group starts in a scenario, whatever
// the duration.
const maxKeysPerGroup = 100000
