package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// measure is what a round does: start with fresh keys, or replay keys the
// same target started before.
type measure int

const (
	newStarts measure = iota
	replays
)

func (m measure) String() string {
	if m == newStarts {
		return "new starts"
	}
	return "replays"
}

// startBody is the body every start sends: one option set, so every
// replay repeats its start's request exactly.
var startBody = []byte(`{"max_results":50}`)

// started is a start a target admitted: what a replay sends again.
type started struct {
	path string
	key  string
}

// target is one server under load and the client that drives it.
type target struct {
	name   string
	base   string // http://127.0.0.1:port
	client *http.Client
	trace  *sqlTrace
	pool   *pgxpool.Pool
	pg     pgCPU
	auth   string // the Authorization header value
	paths  []string
	// keys are the starts this target admitted, replayed by replay rounds.
	keys []started
}

func newTarget(name, base string, clients int, pool *pgxpool.Pool, trace *sqlTrace, pg pgCPU, auth string, searches []uuid.UUID) *target {
	tr := &http.Transport{
		MaxIdleConns:        clients,
		MaxIdleConnsPerHost: clients,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	paths := make([]string, len(searches))
	for i, id := range searches {
		paths[i] = "/v1/saved-searches/" + id.String() + "/start"
	}
	return &target{name: name, base: base, client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		trace: trace, pool: pool, pg: pg, auth: auth, paths: paths}
}

// post sends one start and returns its status and body. With keepBody false
// the body is read and dropped, as a load generator does.
func (t *target) post(ctx context.Context, s started, keepBody bool) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+s.path, bytes.NewReader(startBody))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", t.auth)
	req.Header.Set("Idempotency-Key", s.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := t.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	var body []byte
	if keepBody || res.StatusCode >= 300 {
		body, err = io.ReadAll(io.LimitReader(res.Body, 64<<10))
	} else {
		_, err = io.Copy(io.Discard, res.Body)
	}
	return res.StatusCode, body, res.Header, err
}

// round is what one round measured.
type round struct {
	requests int
	// refused is the answers 429 rate_limited, not in requests.
	refused    int
	elapsed    time.Duration
	latencies  []time.Duration // sorted
	statements int64
	roundTrips int64
	commits    int64
	// dbTime is the time spent in statements, from the driver's call to its
	// answer, summed over the round's statements.
	dbTime time.Duration
	// cpu is the CPU time (user and system) this whole process used in the
	// round: load generator and server. The load generator's share is the
	// same for both handlers, so the difference is the handlers'.
	cpu time.Duration
	// pgCPU is the CPU time the PostgreSQL server used in the round, zero
	// when it cannot be measured.
	pgCPU time.Duration
	// slow is the requests slower than slowThreshold, in no order.
	slow []slowRequest
	// stalls is what else happened meanwhile (see stalls.go).
	stalls stalls
}

func (r round) rate() float64 { return float64(r.requests) / r.elapsed.Seconds() }

func (r round) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(q*float64(len(r.latencies))))]
}

// perRequest divides a round's total by its requests.
func (r round) perRequest(total time.Duration) time.Duration {
	if r.requests == 0 {
		return 0
	}
	return total / time.Duration(r.requests)
}

func (r round) statementsPerRequest() float64 {
	if r.requests == 0 {
		return 0
	}
	return float64(r.statements) / float64(r.requests)
}

func (r round) roundTripsPerRequest() float64 {
	if r.requests == 0 {
		return 0
	}
	return float64(r.roundTrips) / float64(r.requests)
}

func (r round) commitsPerRequest() float64 {
	if r.requests == 0 {
		return 0
	}
	return float64(r.commits) / float64(r.requests)
}

func (r round) dbPerRequest() time.Duration    { return r.perRequest(r.dbTime) }
func (r round) cpuPerRequest() time.Duration   { return r.perRequest(r.cpu) }
func (r round) pgCPUPerRequest() time.Duration { return r.perRequest(r.pgCPU) }

// processCPU returns the CPU time, user and system, the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run drives t with clients concurrent clients for d: every client sends
// its next request as soon as the previous one is answered. A new-start
// round adds the starts it admitted to t.keys; a replay round re-sends keys
// from t.keys. An answer 429 rate_limited is counted in refused, and the
// client sends its next request at once (a client that ignores
// Retry-After); any other answer but 201 (new start) or 200 (replay) ends
// the round with an error.
func (t *target) run(ctx context.Context, m measure, clients int, d time.Duration) (round, error) {
	if m == replays && len(t.keys) == 0 {
		return round{}, errors.New("no started keys to replay")
	}
	want := http.StatusCreated
	if m == replays {
		want = http.StatusOK
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	prefix := uuid.NewString()[:8]
	type result struct {
		latencies []time.Duration
		keys      []started
		refused   int
		slow      []slowRequest
	}
	results := make([]result, clients)
	var wg sync.WaitGroup
	counts, cpu, pgCPU := t.trace.Counts(), processCPU(), t.pg.used()
	begin := time.Now()
	deadline := begin.Add(d)
	for w := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(begin.UnixNano())))
			res := &results[w]
			for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
				var s started
				if m == newStarts {
					s = started{path: t.paths[rng.IntN(len(t.paths))], key: fmt.Sprintf("%s-%d-%d", prefix, w, i)}
				} else {
					s = t.keys[rng.IntN(len(t.keys))]
				}
				sent := time.Now()
				status, body, h, err := t.post(ctx, s, false)
				if err == nil && status == http.StatusTooManyRequests {
					res.refused++
					continue
				}
				if err == nil && status != want {
					err = fmt.Errorf("%s %s answered %d, want %d: %s", t.name, m, status, want, body)
				}
				if err != nil {
					cancel(err)
					return
				}
				took := time.Since(sent)
				res.latencies = append(res.latencies, took)
				if took >= slowThreshold {
					st, ok := parseServerTiming(h.Get("Server-Timing"))
					res.slow = append(res.slow, slowRequest{at: sent.Sub(begin), latency: took, server: st, ok: ok})
				}
				if m == newStarts {
					res.keys = append(res.keys, s)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if err := context.Cause(ctx); err != nil {
		return round{}, err
	}
	c := t.trace.Counts().Sub(counts)
	r := round{elapsed: elapsed, statements: c.Statements, roundTrips: c.RoundTrips, commits: c.Commits,
		dbTime: c.Busy, cpu: processCPU() - cpu, pgCPU: t.pg.used() - pgCPU}
	for _, res := range results {
		r.refused += res.refused
		r.slow = append(r.slow, res.slow...)
		r.latencies = append(r.latencies, res.latencies...)
		t.keys = append(t.keys, res.keys...)
	}
	r.requests = len(r.latencies)
	slices.Sort(r.latencies)
	return r, nil
}

// startAnswer is the part of a start's JSON the check reads.
type startAnswer struct {
	Run struct {
		ID         uuid.UUID  `json:"id"`
		Status     string     `json:"status"`
		SnapshotID *uuid.UUID `json:"snapshot_id"`
	} `json:"run"`
	Snapshot *struct {
		ID uuid.UUID `json:"id"`
	} `json:"snapshot"`
}

// probe sends one new start and one replay of it, alone on t, checks the
// answers (201, then 200 replayed naming the same Run and snapshot) and
// returns the statements each cost.
func (t *target) probe(ctx context.Context) (startSQL, replaySQL [][]string, err error) {
	s := started{path: t.paths[0], key: "probe-" + uuid.NewString()}
	var first startAnswer
	startSQL, err = t.trace.Record(func() error {
		status, body, _, err := t.post(ctx, s, true)
		if err != nil {
			return err
		}
		if status != http.StatusCreated {
			return fmt.Errorf("%s: a new start answered %d, want 201: %s", t.name, status, body)
		}
		if err := json.Unmarshal(body, &first); err != nil || first.Snapshot == nil || first.Run.SnapshotID == nil ||
			*first.Run.SnapshotID != first.Snapshot.ID || first.Run.Status != "queued" {
			return fmt.Errorf("%s: a new start answered %s (%v)", t.name, body, err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	replaySQL, err = t.trace.Record(func() error {
		status, body, h, err := t.post(ctx, s, true)
		if err != nil {
			return err
		}
		var again startAnswer
		switch {
		case status != http.StatusOK || h.Get("Idempotent-Replayed") != "true":
			return fmt.Errorf("%s: a replay answered %d (Idempotent-Replayed %q), want 200 replayed: %s",
				t.name, status, h.Get("Idempotent-Replayed"), body)
		case json.Unmarshal(body, &again) != nil || again.Snapshot == nil ||
			again.Run.ID != first.Run.ID || again.Snapshot.ID != first.Snapshot.ID:
			return fmt.Errorf("%s: a replay answered another Run or snapshot: %s", t.name, body)
		}
		return nil
	})
	return startSQL, replaySQL, err
}
