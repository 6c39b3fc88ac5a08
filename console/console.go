// Package console is searchd's audit and operator console: server-rendered
// HTML under /console/, served beside the API. See docs/console.md.
//
// An organization's members see its saved searches, snapshots, Runs and
// provider jobs (audit.go); operators see idempotency claims across
// organizations (operator.go). Every read goes through the domain stores
// with the session's organization.
//
// People sign in through the OpenID Connect provider (Deps.SignIn) or, in
// development, by pasting a token (Deps.TokenSignIn). The console then
// keeps a server-side session (package sessions); its cookie holds a
// random secret, never a token, and sign-out deletes the session
// everywhere at once.
//
// Every POST must be same-origin (http.CrossOriginProtection) and, once
// signed in, carry the session's CSRF token. Every response carries a
// strict Content-Security-Policy; pages work without JavaScript. Tokens
// and cookies are never logged. Templates and assets are embedded.
package console

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/felixge/httpsnoop"
	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/runs/runstream"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/sessions"
	"github.com/searchd/searchd/snapshot"
	"github.com/searchd/searchd/sweeper"
	"github.com/searchd/searchd/tools"
	"github.com/searchd/searchd/webhooks"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console/"

// Deps are what a [Console] is built from. Fields documented as nil-able
// are optional; the rest are required.
type Deps struct {
	// The auditor's pages read these with the session's organization;
	// JobAudit also serves the operator's "Inbound" panel.
	SavedSearches *savedsearch.Store
	Snapshots     *snapshot.Store
	Runs          *runs.Store
	JobAudit      *providerjobs.Audit
	// Operator serves the operator's reads and force-release.
	Operator    *operator.Store
	SweeperRuns *sweeper.RunLog
	// Dispatches serves the Run page's dispatch timeline and retry.
	Dispatches *dispatch.Store
	// Backlog adds a notice when Runs wait and this process does not
	// dispatch. Nil shows none.
	Backlog *dispatch.Watcher
	// Schedules serves schedules and occurrences; nil hides them.
	Schedules *schedule.Store
	// Webhooks serves the webhook endpoints page; nil hides it.
	Webhooks *webhooks.Store
	// Uncertain and Resolver serve the "Tool calls to decide" panel,
	// shown only when both are set.
	Uncertain *tools.Inspector
	Resolver  *tools.Resolver
	Sessions  *sessions.Store
	// SignIn signs in through the OIDC provider; nil without one.
	SignIn *auth.SignIn
	// TokenSignIn allows signing in with a pasted bearer token, checked
	// by Verifier (development).
	TokenSignIn bool
	Verifier    *auth.Verifier
	// SessionLifetime is the longest a session lives; zero is
	// DefaultSessionLifetime.
	SessionLifetime time.Duration
	// Logger receives one line per request and errors; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// OverviewTTL is how long the claims page reuses its counts and
	// chart (a full table scan). Up to overviewStaleFactor times as old,
	// they are served while a background read refreshes them. Zero is
	// DefaultOverviewTTL; negative reads on every request.
	OverviewTTL time.Duration
	// Seats is the seat queue shared with the API: every database
	// read takes a seat, charged to the organization or the operator.
	Seats *seatq.Queue
	// OverviewWait is how long the claims page waits for counts it lacks
	// before rendering without them (console.js fills them in). Zero is
	// DefaultOverviewWait; negative waits for the read.
	OverviewWait time.Duration
	// ServiceKeys serves the keys page (keys.go); nil hides it.
	ServiceKeys ServiceKeys
	// Streams serves the Run page's live updates, sharing the API's cap;
	// nil serves none.
	Streams *runstream.Hub
}

// DefaultSessionLifetime is the default [Deps.SessionLifetime].
const DefaultSessionLifetime = 8 * time.Hour

// DefaultOverviewTTL is the default [Deps.OverviewTTL].
const DefaultOverviewTTL = 5 * time.Second

// DefaultOverviewWait is the default [Deps.OverviewWait], within the
// console's 100 ms page budget.
const DefaultOverviewWait = 50 * time.Millisecond

// overviewStaleFactor times OverviewTTL is the oldest counts served
// while a background read refreshes them.
const overviewStaleFactor = 6

// Console serves the console. It is safe for concurrent use.
type Console struct {
	d               Deps
	sessionLifetime time.Duration
	pages           map[string]*template.Template
	handler         http.Handler
	log             *slog.Logger
	now             func() time.Time
	overview        overviewCache
	static          *staticFiles
}

// New returns the console built on d, or an error naming the required
// dependencies when one is missing, or the first other problem.
func New(d Deps) (*Console, error) {
	switch {
	case d.SavedSearches == nil, d.Snapshots == nil, d.Runs == nil, d.JobAudit == nil, d.Dispatches == nil,
		d.Operator == nil, d.SweeperRuns == nil, d.Seats == nil, d.Sessions == nil:
		return nil, errors.New("console: Deps.SavedSearches, Snapshots, Runs, JobAudit, Dispatches, Operator, SweeperRuns, Seats and Sessions are required")
	case d.TokenSignIn && d.Verifier == nil:
		return nil, errors.New("console: Deps.Verifier is required with TokenSignIn")
	case d.SessionLifetime < 0:
		return nil, errors.New("console: Deps.SessionLifetime is negative")
	}
	c := &Console{d: d, sessionLifetime: cmp.Or(d.SessionLifetime, DefaultSessionLifetime),
		log: cmp.Or(d.Logger, slog.New(slog.DiscardHandler)), now: d.Now}
	if c.now == nil {
		c.now = time.Now
	}
	c.overview = overviewCache{ttl: cmp.Or(d.OverviewTTL, DefaultOverviewTTL), wait: cmp.Or(d.OverviewWait, DefaultOverviewWait), c: c}
	c.overview.staleFor = overviewStaleFactor * c.overview.ttl
	var err error
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	if c.static, err = newStaticFiles(c.notFound); err != nil {
		return nil, fmt.Errorf("console: static files: %w", err)
	}
	c.handler = c.routes()
	return c, nil
}

// Mount serves the console under [Prefix] and everything else with next.
// It dispatches on the path alone: a ServeMux would set r.Pattern, which
// the API's tracing reads.
func (c *Console) Mount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, Prefix):
			c.handler.ServeHTTP(w, r)
		case r.URL.Path == strings.TrimSuffix(Prefix, "/"):
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /console/static/{name}", c.static)

	mux.HandleFunc("GET /console/{$}", c.session(anyone, c.home))
	mux.HandleFunc("GET /console/sign-in", func(w http.ResponseWriter, r *http.Request) { c.renderSignIn(w, r, http.StatusOK, "") })
	mux.HandleFunc("POST /console/sign-in", c.signIn)
	if c.d.SignIn != nil {
		mux.HandleFunc("POST /console/sign-in/provider", c.startProviderSignIn)
		mux.HandleFunc("GET "+oidcPath+"callback", c.providerCallback)
	}
	mux.HandleFunc("POST /console/sign-out", c.session(anyone, c.signOut))

	// The auditor's views: one organization's records.
	mux.HandleFunc("GET /console/saved-searches", c.session(auditor, c.show(c.savedSearches)))
	mux.HandleFunc("GET /console/saved-searches/{id}", c.session(auditor, c.show(c.savedSearch)))
	mux.HandleFunc("GET /console/saved-searches/{id}/compare", c.session(auditor, c.show(c.compare)))
	mux.HandleFunc("GET /console/snapshots/{id}", c.session(auditor, c.show(c.snapshot)))
	mux.HandleFunc("GET /console/runs", c.session(auditor, c.show(c.runs)))
	mux.HandleFunc("GET /console/runs/{id}", c.session(auditor, c.show(c.run)))
	mux.HandleFunc("POST /console/runs/{id}/dispatch/retry", c.session(auditor, c.retryDispatch))
	if c.d.Schedules != nil {
		mux.HandleFunc("GET /console/schedules", c.session(auditor, c.show(c.schedules)))
	}
	if c.d.Streams != nil {
		mux.HandleFunc("GET /console/runs/{id}/events", c.session(streamer, c.runEvents))
	}
	mux.HandleFunc("GET /console/provider-jobs", c.session(auditor, c.show(c.providerJobs)))
	mux.HandleFunc("GET /console/provider-jobs/{id}", c.session(auditor, c.show(c.providerJob)))
	if c.d.ServiceKeys != nil {
		mux.HandleFunc("GET /console/service-keys", c.session(keyAdmin, c.show(c.serviceKeys)))
		mux.HandleFunc("POST /console/service-keys", c.session(keyAdmin, c.createServiceKey))
		mux.HandleFunc("POST /console/service-keys/{id}/revoke", c.session(keyAdmin, c.revokeServiceKey))
	}
	if c.d.Webhooks != nil {
		mux.HandleFunc("GET /console/webhooks", c.session(auditor, c.show(c.webhooksPage)))
		mux.HandleFunc("POST /console/webhooks", c.session(keyAdmin, c.createWebhook))
		mux.HandleFunc("POST /console/webhooks/{id}/state", c.session(keyAdmin, c.setWebhookState))
		mux.HandleFunc("POST /console/webhooks/{id}/delete", c.session(keyAdmin, c.deleteWebhook))
	}

	// The operator's views, across organizations.
	for _, p := range c.operatorPanels() {
		mux.HandleFunc("GET /console/operator/"+p.name, c.session(operatorOnly, c.show(p.page)))
		for _, r := range p.more {
			mux.HandleFunc(r.pattern, c.session(operatorOnly, r.handler))
		}
	}
	mux.HandleFunc("/console/", c.notFound)

	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusForbidden, "Cross-origin request refused",
			"This form was sent from another site, so it was not carried out.")
	}))
	return c.logRequests(securityHeaders(csrf.Handler(mux)))
}

// contentSecurityPolicy admits only the console's own files and forms.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every console response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if r.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		next.ServeHTTP(w, r)
	})
}

// logRequests gives each request an id and logs one line naming its
// route pattern, never the path, query, headers or cookies.
func (c *Console) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := uuid.NewString()
		w.Header().Set("X-Request-Id", id)
		r = r.WithContext(telemetry.WithRequestID(r.Context(), id))
		m := httpsnoop.CaptureMetrics(next, w, r)
		c.log.LogAttrs(context.WithoutCancel(r.Context()), slog.LevelInfo, "console request",
			slog.String("request_id", id),
			slog.String("method", r.Method),
			slog.String("route", r.Pattern),
			slog.Int("status", m.Code),
			slog.Duration("duration", m.Duration))
	})
}

// staticFiles serves the embedded assets by exact name with an ETag;
// anything else, directories included, is a 404.
type staticFiles struct {
	files    map[string][]byte
	etags    map[string]string
	notFound http.HandlerFunc
}

// newStaticFiles reads every file of staticFS once.
func newStaticFiles(notFound http.HandlerFunc) (*staticFiles, error) {
	s := &staticFiles{files: map[string][]byte{}, etags: map[string]string{}, notFound: notFound}
	err := fs.WalkDir(staticFS, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(staticFS, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		name = strings.TrimPrefix(name, "static/")
		s.files[name], s.etags[name] = b, `"`+hex.EncodeToString(sum[:8])+`"`
		return nil
	})
	return s, err
}

func (s *staticFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, ok := s.files[name]
	if !ok {
		s.notFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("ETag", s.etags[name])
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
