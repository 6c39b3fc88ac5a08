//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/searchd/searchd/client"
	"github.com/searchd/searchd/internal/seatq"
)

// The blackholed primary: the network between the replicas and PostgreSQL
// swallows everything, as a partition does, while the load runs. Nothing
// is refused and nothing is reset, so only searchd's own client-side
// bounds end its waits (the seat queue's longest wait for a seat,
// which requests waiting on the database hold; SEARCHD_DB_ANSWER_TIMEOUT
// for any one answer, a pool connection included; admission's 5 s release
// timeout for the release a failed start attempts).

// releaseTimeout is admission's release timeout: a start whose claim
// failed releases it on a context of its own, bounded by it.
const releaseTimeout = 5 * time.Second

// answerBound is the longest a request may take while the database is
// blackholed: it waits for a seat at most the seat queue's longest
// wait (the replicas run at its default; every seat is held by requests
// waiting on the database), then its first call to the database waits at
// most the answer timeout, then a failed start's release at most the
// release timeout. The slack is the busy machine's: a process descheduled
// for a moment.
func (c config) answerBound() time.Duration {
	return seatq.DefaultMaxWait + c.answerTimeout + releaseTimeout + 3*time.Second
}

// readyBound is how soon /readyz says not ready once the database is
// blackholed: its checker's check (every 2 s) gives up after 3 s; slack.
const readyBound = 2*time.Second + 3*time.Second + 3*time.Second

// probeAnswer is one request a patient probe sent and what came back.
type probeAnswer struct {
	replica, what string
	sent, end     time.Time
	status        int
	code          string
	err           error
}

func (a probeAnswer) String() string {
	switch {
	case a.err != nil:
		return fmt.Sprintf("%s %s sent %s: no answer after %s: %v", a.replica, a.what, a.sent.Format("15:04:05.000"),
			a.end.Sub(a.sent).Round(time.Millisecond), a.err)
	default:
		return fmt.Sprintf("%s %s sent %s: %d %s after %s", a.replica, a.what, a.sent.Format("15:04:05.000"), a.status, a.code,
			a.end.Sub(a.sent).Round(time.Millisecond))
	}
}

// blackholeDatabase blackholes the network to PostgreSQL for longer than
// answerBound, then heals it. Meanwhile patient probes, one
// start, one read and one /readyz per replica every half second, each
// waiting a minute for its answer, record what every replica answers:
//   - every request sent and answered while the database was blackholed
//     is a 503 unavailable (the API) or a 503 (/readyz), none later
//     than answerBound (/readyz: at once, not ready within readyBound);
//   - no request hangs: every one sent during the blackhole is answered
//     within answerBound, whatever the heal;
//   - service returns: after the heal, every replica answers a read 200
//     and /readyz 200 within answerBound.
//
// The load's answers are checked as after every fault (verify): 503 only
// while the database is unreachable, every key finished with one Run.
func blackholeDatabase(ctx context.Context, s *scenarioRun, cycle int) error {
	// Longer than a request may take: a request that waited for the
	// database as long as it is unreachable would miss the bound.
	faultFor := s.h.cfg.answerBound() + 4*time.Second
	var (
		mu      sync.Mutex
		answers []probeAnswer
		wg      sync.WaitGroup
	)
	hc := &http.Client{Timeout: time.Minute}
	record := func(a probeAnswer) {
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
	}
	get := func(r *replica, what, path string, auth bool) probeAnswer {
		a := probeAnswer{replica: r.name, what: what, sent: time.Now()}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+path, nil)
		if err == nil {
			if auth {
				req.Header.Set("Authorization", "Bearer "+s.token)
			}
			var res *http.Response
			if res, err = hc.Do(req); err == nil {
				body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
				res.Body.Close()
				a.status, a.code = res.StatusCode, problemCode(body)
			}
		}
		a.end, a.err = time.Now(), err
		return a
	}

	from := time.Now()
	live := s.h.proxy.Blackhole()
	stop := make(chan struct{})
	for i, r := range s.h.replicas {
		starter, err := newClient(fmt.Sprintf("blackhole.%s", r.name), s.token, []*replica{r}, 0,
			client.RetryPolicy{MaxAttempts: 1, AttemptTimeout: time.Minute}, s.rec)
		if err != nil {
			s.h.proxy.Heal()
			return err
		}
		wg.Go(func() {
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				key := fmt.Sprintf("%s-blackhole-%d-%d-%03d", s.name, cycle, i, n)
				spec := s.register(key, i+n)
				wg.Go(func() {
					sent := time.Now()
					// Pinned: a start the fault broke need not succeed;
					// finish starts its key again after the scenario.
					cl := s.start(ctx, starter, "blackhole."+r.name, key, spec, true)
					a := probeAnswer{replica: r.name, what: "start " + key, sent: sent, end: cl.end, err: cl.err}
					a.status, a.code = 201, ""
					if cl.err == nil && !cl.created {
						a.status = 200
					}
					var pe *client.APIError
					if errors.As(cl.err, &pe) {
						a.status, a.code, a.err = pe.Status, pe.Code, nil
					}
					record(a)
				})
				wg.Go(func() { record(get(r, "read", "/v1/saved-searches/"+s.searches[n%len(s.searches)], true)) })
				wg.Go(func() { record(get(r, "readyz", "/readyz", false)) })
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
	}
	time.Sleep(faultFor)
	healed := time.Now()
	s.h.proxy.Heal()
	close(stop)
	// Requests in flight at the heal may still fail, up to the bound.
	s.down(from, healed.Add(s.h.cfg.answerBound()))

	// Service returns: every replica reads and is ready again.
	var recovered []string
	for _, r := range s.h.replicas {
		var took time.Duration
		for {
			read := get(r, "read", "/v1/saved-searches/"+s.searches[0], true)
			ready := get(r, "readyz", "/readyz", false)
			took = time.Since(healed)
			if read.status == http.StatusOK && ready.status == http.StatusOK {
				break
			}
			if took > s.h.cfg.answerBound() {
				s.t.Errorf("%s did not serve again within %s of the heal: last %s; %s", r.name, s.h.cfg.answerBound(), read, ready)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		recovered = append(recovered, fmt.Sprintf("%s %s", r.name, took.Round(100*time.Millisecond)))
	}
	wg.Wait()

	// Every probe's answer.
	counts := map[string]int{}
	var slowest time.Duration
	for _, a := range answers {
		took := a.end.Sub(a.sent)
		inside := a.end.Before(healed) // sent and answered while blackholed
		kind := strings.Fields(a.what)[0]
		switch {
		case a.err != nil:
			s.t.Errorf("blackhole: no answer: %s", a)
			continue
		case kind == "readyz" && took > 2*time.Second:
			s.t.Errorf("blackhole: /readyz is not answered at once: %s", a)
		case kind != "readyz" && a.sent.Before(healed) && took > s.h.cfg.answerBound():
			s.t.Errorf("blackhole: answered later than %s: %s", s.h.cfg.answerBound(), a)
		case inside && kind != "readyz" && (a.status != http.StatusServiceUnavailable || a.code != "unavailable"):
			s.t.Errorf("blackhole: want 503 unavailable while the database is blackholed: %s", a)
		case inside && kind == "readyz" && a.sent.Sub(from) > readyBound && a.status != http.StatusServiceUnavailable:
			s.t.Errorf("blackhole: /readyz still ready %s into the blackhole: %s", a.sent.Sub(from).Round(time.Millisecond), a)
		}
		if kind != "readyz" && a.sent.Before(healed) {
			slowest = max(slowest, took)
		}
		label := fmt.Sprintf("%s %d", kind, a.status)
		if !inside {
			label += " (over the heal)"
		}
		counts[label]++
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	s.note("blackholed the network to PostgreSQL for %s (%d connections live, held unanswered); probes: %s; "+
		"slowest answer while blackholed %s (bound %s); served again after %s",
		faultFor.Round(100*time.Millisecond), live, strings.Join(parts, ", "), slowest.Round(time.Millisecond),
		s.h.cfg.answerBound(), strings.Join(recovered, ", "))
	return nil
}

// problemCode returns the code of a problem+json body, "" for any other.
func problemCode(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code
}
