package api

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// DefaultOrgMaxInFlight is the default of [Deps.OrgMaxInFlight]: a quarter
// of the default pool of cmd/searchd (16), so that three organizations at
// their cap still leave a quarter of the pool to everybody else.
const DefaultOrgMaxInFlight = 4

// rateLimitedRetryAfter is the Retry-After of a 429: one of the caller's
// own requests in flight ends long before it on any healthy database.
const rateLimitedRetryAfter = time.Second

// DefaultMaxInFlight is the default of [Deps.MaxInFlight]: one request
// more than the processors Go schedules on. While the processors are
// saturated, requests beyond that only queue for them, and each one more
// of a heavy organization slows everybody's.
func DefaultMaxInFlight() int { return runtime.GOMAXPROCS(0) + 1 }

// orgLimiter counts the requests each organization has in flight and
// admits one more under two rules. An organization never has more than
// max in flight. And while the process serves budget requests or more of
// all organizations together and its processors are saturated (see
// cpuPressure), the organization with the most in flight (or one of those
// tied for the most), when it is not alone, may have only what the others
// leave of the budget, at least one: a lighter organization is admitted at
// once, over the budget if need be, while the heaviest is refused until it
// is back within what is left. While the processors keep up (the requests
// wait on the database, not on them), only the cap applies. It is a mutex
// and a map: no database round trip, no goroutine, and an entry only while
// an organization has a request in flight, so its size is bounded by the
// requests being served.
type orgLimiter struct {
	max, budget int
	// saturated reports whether the processors are saturated.
	saturated func() bool
	mu        sync.Mutex
	total     int
	inFlight  map[uuid.UUID]int
}

func newOrgLimiter(max, budget int) *orgLimiter {
	return &orgLimiter{max: max, budget: budget, saturated: newCPUPressure().Saturated, inFlight: map[uuid.UUID]int{}}
}

// refusal says why a request was not admitted.
type refusal int

const (
	admitted refusal = iota
	// overCap: the organization has max requests in flight.
	overCap
	// overShare: the process is at its budget with its processors
	// saturated, and the organization is the heaviest in flight, with
	// what the others leave it.
	overShare
)

// acquire counts one more request of org in flight and returns admitted,
// or returns why not and counts nothing; after admitted the caller must
// release it.
func (l *orgLimiter) acquire(org uuid.UUID) refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.inFlight[org]
	if n >= l.max {
		return overCap
	}
	if others := l.total - n; others > 0 && l.total >= l.budget && n >= max(1, l.budget-others) && l.saturated() {
		heaviest := true
		for o, m := range l.inFlight {
			if o != org && m > n {
				heaviest = false
				break
			}
		}
		if heaviest {
			return overShare
		}
	}
	l.inFlight[org] = n + 1
	l.total++
	return admitted
}

func (l *orgLimiter) release(org uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if n := l.inFlight[org]; n > 1 {
		l.inFlight[org] = n - 1
	} else {
		delete(l.inFlight, org)
	}
}

// limitOrganization is the middleware, after authenticate, that caps the
// requests one organization has in flight at once, body reading and every
// statement included, so that one tenant's slow lists or floods of starts
// cannot hold the whole database pool (or buffer bodies without end) while
// other tenants wait, and that shares the process evenly between the
// organizations in flight once it is busy (see orgLimiter). A request
// refused is not queued: it answers 429 rate_limited with Retry-After at
// once and is counted in searchd_http_rate_limited_total. The limits are
// per process; with replicas, an organization may have that many on each.
func (s *Server) limitOrganization(next echo.HandlerFunc) echo.HandlerFunc {
	limiter := s.orgLimiter
	return func(c echo.Context) error {
		org := principal(c).OrganizationID
		var detail string
		switch limiter.acquire(org) {
		case admitted:
			defer limiter.release(org)
			return next(c)
		case overCap:
			detail = fmt.Sprintf("your organization has %d requests in flight, the most this server serves at once for one organization; "+
				"retry after the Retry-After delay", limiter.max)
		default:
			detail = "this server is busy and your organization has the most requests in flight of those it serves; " +
				"retry after the Retry-After delay"
		}
		s.metrics.ObserveRateLimited(s.routeLabel(c))
		return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimited, detail: detail,
			retryAfter: rateLimitedRetryAfter}
	}
}
