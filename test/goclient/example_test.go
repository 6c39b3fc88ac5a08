package goclient_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

// exampleServer starts the real API on a database of its own, in process,
// and returns its URL and a token of a fresh organization; the server is
// closed when the test binary ends (see pgtest.OpenDB).
func exampleServer() (baseURL, token string) {
	pool, err := pgtest.OpenDB()
	if err != nil {
		log.Fatal(err)
	}
	// Each store once, on the database's clock, as cmd/searchd builds them.
	plane := idempotency.NewService(pool, idempotency.Config{})
	searches, snapshots := savedsearch.NewStore(pool), snapshot.NewStore(pool)
	runStore := runs.NewStore(pool, runs.Config{})
	starter, err := admission.NewStarter(admission.Deps{
		Pool: pool, Plane: plane, SavedSearches: searches, Snapshots: snapshots, Runs: runStore,
	}, admission.Config{})
	if err != nil {
		log.Fatal(err)
	}
	// The seat queue, its seats the pool's size, as searchd serve
	// builds it.
	queue, err := seatq.New(seatq.Config{Seats: int(pool.Config().MaxConns)})
	if err != nil {
		log.Fatal(err)
	}
	verifier, err := auth.NewVerifier(context.Background(), auth.Config{Secret: []byte(testSecret)})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := api.New(api.Deps{
		Seats:         queue,
		Plane:         plane,
		SavedSearches: searches,
		Snapshots:     snapshots,
		Runs:          runStore,
		Starter:       starter,
		ProviderJobs:  providerjobs.New(pool, plane, providerjobs.Config{}),
		Dispatches:    dispatch.NewStore(pool, nil),
		Verifier:      verifier,
		Ready:         func(context.Context) error { return nil },
	})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	pgtest.AtExit(ts.Close)
	token, err = auth.SignToken([]byte(testSecret), uuid.New(), "example", time.Now(), time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	return ts.URL, token
}

// loseFirstAnswer is a transport that delivers every request but loses the
// answer to the first one, as a connection that drops after the server
// committed does: the caller cannot tell whether the start was admitted.
type loseFirstAnswer struct{ lost atomic.Bool }

func (t *loseFirstAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && t.lost.CompareAndSwap(false, true) {
		res.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return res, err
}

// A start sends every retry with one Idempotency-Key, so an attempt whose
// answer was lost after the server admitted the Run is answered by the
// retry with that Run, replayed, never with a second one. An application
// that must survive its own restart mints the key first, persists it, and
// starts with it again after the restart: the same Run again.
func ExampleClient_StartRun() {
	ctx := context.Background()
	baseURL, token := exampleServer()
	c, err := client.New(baseURL, client.Options{
		Token:      token,
		HTTPClient: &http.Client{Transport: &loseFirstAnswer{}},
	})
	if err != nil {
		log.Fatal(err)
	}
	key := client.NewIdempotencyKey() // persisted with the intent to start
	start := client.DirectStart{Kind: client.KindCapability, Name: "web.search",
		Input: map[string]any{"query": "laptops"}}

	res, err := c.StartRun(ctx, start, client.WithIdempotencyKey(key))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("attempts %d, created %v, replayed %v\n", res.Attempts, res.Created, res.Replayed)

	// After a restart: the same start with the persisted key.
	again, err := c.StartRun(ctx, start, client.WithIdempotencyKey(key))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("the same Run: %v, replayed %v\n", again.Run.ID == res.Run.ID, again.Replayed)
	// Output:
	// attempts 2, created false, replayed true
	// the same Run: true, replayed true
}
