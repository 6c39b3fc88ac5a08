package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/sweeper"
	"github.com/searchd/searchd/webhooks"
)

// defaultDBMaxConns sizes the pool when neither the setting nor the URL's
// pool_max_conns does. The work is bound by commit latency, not by cores:
// connections beyond the CPU count keep the CPUs busy while others wait on
// their WAL flush, which PostgreSQL shares among the commits waiting
// together (group commit). pgx's max(4, CPUs) left a 2-core server at 4,
// which four slow requests of one tenant filled.
const defaultDBMaxConns = 16

// settingsTable declares every setting of searchd, once, in the order
// they are read, listed by --help and documented (docs/settings.md,
// searchd.example.env; `make settings-docs` writes both, and a test fails
// when they differ from what this table makes). A setting that depends on
// another (its default or its range) comes after it. A new setting is a
// row here, with its place in [serverConfig]; what settings say of one
// another is in [checkSettings].
var settingsTable = []section{
	{"Database", "", []spec{
		{env: envDatabaseURL, flag: "database-url", in: cmdConnected,
			kind: text{at: func(c *loading) *string { return &c.DatabaseURL }, check: databaseURLProblem,
				required: "the PostgreSQL connection string, such as postgres://user:password@localhost:5432/searchd"},
			def: "required", devDef: "none: run a local cluster",
			values: "a PostgreSQL connection string (a URL, or keyword=value pairs); as a flag, without a password",
			meaning: "PostgreSQL connection string, such as `postgres://user@host:5432/searchd`; pgx settings such as " +
				"`pool_max_conns` may be added to it, and several hosts with `target_session_attrs=read-write` (a failover " +
				"pair). As a flag it must hold no password (`ps` shows flags): give it in the variable, `PGPASSWORD` or a " +
				"`~/.pgpass` file. Without it, `dev` runs a local cluster under the dev directory",
			example: "postgres://searchd:CHANGE-ME@db.example.com:5432/searchd"},
		{env: "SEARCHD_DB_MAX_CONNS", flag: "db-max-conns", in: cmdServers,
			kind: field[int32]{at: func(c *loading) *int32 { return &c.DBMaxConns }, of: "connections"},
			def:  "pool_max_conns of the URL, else " + strconv.Itoa(defaultDBMaxConns),
			meaning: "most connections in the database pool; with waiting on, one more listens for claims, and `/readyz` " +
				"checks on one more of its own. The default is sized for commits, not CPUs (docs/operations.md says why)"},
		{env: envIdleInTransactionTimeout, flag: "db-idle-in-transaction-timeout", in: cmdServers,
			kind: sessionTimeout(func(c *loading) *time.Duration { return &c.Session.IdleInTransaction }),
			meaning: "PostgreSQL `idle_in_transaction_session_timeout` of every session of the pool (it overrides the URL's): " +
				"a replica stopped inside a transaction (SIGSTOP, a long pause, a partition) loses its session and its row " +
				"locks after this long, and its claims fall to the lease rules; `0s` for none"},
		{env: envLockTimeout, flag: "db-lock-timeout", in: cmdServers,
			kind: sessionTimeout(func(c *loading) *time.Duration { return &c.Session.Lock }),
			meaning: "PostgreSQL `lock_timeout` of every session: the longest a statement waits for a row lock (then 503), " +
				"longer than the idle-in-transaction timeout, so a waiter outlasts a stalled holder rather than failing " +
				"first; `0s` for none"},
		{env: "SEARCHD_DB_STATEMENT_TIMEOUT", flag: "db-statement-timeout", in: cmdServers,
			kind: sessionTimeout(func(c *loading) *time.Duration { return &c.Session.Statement }),
			meaning: "PostgreSQL `statement_timeout` of every session: the longest a statement runs (then 503), so one slow " +
				"statement (a tenant's heavy list) cannot hold a pool connection long; `0s` for none"},
		{env: envDBAnswerTimeout, flag: "db-answer-timeout", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.DBAnswerTimeout }, none: true, like: "5s or 1m"},
			meaning: "the longest searchd waits for any one answer of the database (a statement, a batch, a commit, a " +
				"connection from the pool) before it counts the database unreachable (a partition, a blackholed primary): " +
				"the call fails, its connection is closed and the request answers 503. The default is the statement " +
				"timeout's and 5 s, as PostgreSQL ends a longer statement itself and says so; `0s` for none"},
	}},
	{"HTTP", "", []spec{
		{env: envAddr, flag: "addr", in: cmdServers,
			kind: text{at: func(c *loading) *string { return &c.Addr },
				check: addrProblem, desc: "host:port, the port from 0 to 65535"},
			meaning: "address to listen on"},
		{env: "SEARCHD_SHUTDOWN_GRACE", flag: "shutdown-grace", in: cmdServers,
			kind:    field[time.Duration]{at: func(c *loading) *time.Duration { return &c.ShutdownGrace }, none: true, like: "10s or 1m30s"},
			meaning: "on SIGTERM or SIGINT, how long requests in flight may finish before they are cancelled (their claims released)"},
		{env: envMaxBodyBytes, flag: "max-body-bytes", in: cmdServers,
			kind:    field[int64]{at: func(c *loading) *int64 { return &c.MaxBodyBytes }, of: "bytes"},
			meaning: "largest request body; every body the API's size limits allow fits in the default"},
		{env: "SEARCHD_MAX_HEADER_BYTES", flag: "max-header-bytes", in: cmdServers,
			kind: field[int64]{at: func(c *loading) *int64 { return &c.MaxHeaderBytes }, of: "bytes"},
			meaning: "largest request header, the request line and every field together; a larger one " +
				"is answered 431 before it is read further, and its connection closed. It bounds the number of fields " +
				"too (one per 4 bytes at most), and so the memory a request's header takes. Go reads up to 4 KiB past it"},
		{env: "SEARCHD_MAX_PREFER_WAIT", flag: "max-prefer-wait", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.MaxPreferWait }, none: true, like: "30s, or 0s to never wait"},
			meaning: "longest `Prefer: wait=N` a start honours (a longer N is cut to it); `0s` never waits, and then no " +
				"connection listens for claims"},
		{env: envCORSOrigins, flag: "cors-origins", in: cmdServers,
			kind: custom{parse: parseCORSOrigins,
				desc: "origins separated by commas, each lower-case `scheme://host[:port]` with no path or wildcard; or `*`"},
			meaning: "origins a browser page may call the API from (CORS), such as " +
				"`http://127.0.0.1:5173,https://app.example.com`; `*` allows every origin; none (the default) allows no other origin"},
	}},
	{"Memory", "", []spec{
		{env: envGoMemLimit, in: cmdServe, kind: custom{desc: "a size in Go's syntax, such as `460MiB`"},
			def: "90 % of the container's memory limit (its cgroup's), or none outside a container",
			meaning: "the Go runtime's soft memory limit: past it the collector works harder rather than let the heap " +
				"grow. The memory tests hold `serve` at its defaults under 256 MiB resident under every attack they " +
				"make (docs/testing.md); give its container at least 512 MiB, and a limit lower than the container's " +
				"only to leave room for something else in it. Read by the Go runtime; `serve` logs the limit in effect"},
	}},
	{"Seat queue", "The seat queue the API, the console and provider callbacks share (docs/seat-queue.md).", []spec{
		{env: envSeats, flag: "seats", was: renamed{"SEARCHD_ADMISSION_SEATS", "admission-seats"}, in: cmdServers,
			kind: field[int]{at: func(c *loading) *int { return &c.Seats.Seats }, of: "requests"},
			def:  "the pool's size (--db-max-conns)",
			meaning: "requests served at once by the API, the console and provider callbacks together; a free seat is taken " +
				"at once by whoever asks, and when all are taken each organization (operator, provider) waits in its own " +
				"queue, served in turn"},
		{env: "SEARCHD_SEAT_QUEUE_LENGTH", flag: "seat-queue-length", was: renamed{"SEARCHD_ADMISSION_QUEUE_LENGTH", "admission-queue-length"}, in: cmdServers,
			kind: field[int]{at: func(c *loading) *int { return &c.Seats.QueueLength }, of: "requests"},
			meaning: "most requests of one organization (operator, provider) waiting for a seat; one more answers 429 " +
				"`rate_limited` with `Retry-After`"},
		{env: "SEARCHD_SEAT_MAX_WAIT", flag: "seat-max-wait", was: renamed{"SEARCHD_ADMISSION_MAX_WAIT", "admission-max-wait"}, in: cmdServers,
			kind:    field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Seats.MaxWait }, like: "10s or 500ms"},
			meaning: "longest a request waits for a seat, then 429 `rate_limited` with `Retry-After`"},
		{env: envWideSeats, flag: "wide-seats", was: renamed{"SEARCHD_ADMISSION_WIDE_SEATS", "admission-wide-seats"}, in: cmdServers,
			kind: field[int]{at: func(c *loading) *int { return &c.Seats.WideSeats }, of: "seats"},
			def:  "half the seats, at most twice the processors (GOMAXPROCS)",
			meaning: "seats that wide requests (long lists, large bodies and answers, the console's heavy pages: more than " +
				"one seat each) hold together, and the widest a request can be; the other seats stay for narrow requests " +
				"such as starts. Wide requests are bound by the processor, so more of them at once only slows every " +
				"request beside them"},
	}},
	{"Run event streams", "GET /v1/runs/{id}/events and the console's Run page (docs/api.md, Watching a Run).", []spec{
		{env: "SEARCHD_EVENT_STREAMS_MAX", flag: "event-streams-max", in: cmdServers,
			kind: field[int]{at: func(c *loading) *int { return &c.Streams.MaxStreams }, of: "streams"},
			meaning: "most event streams this server keeps open at once, the API's and the console's together; one more " +
				"answers 503 `too_many_streams` with `Retry-After`. Each open stream costs a connection, a little memory and " +
				"one primary-key lookup per poll, and holds no seat while it waits"},
		{env: "SEARCHD_EVENT_STREAM_POLL", flag: "event-stream-poll", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Streams.Poll }, like: "1s or 500ms"},
			meaning: "how often an open stream looks up its Run's version (one primary-key lookup): how late an event " +
				"arrives at most, and the database's load from streams (`--event-streams-max` / this, lookups a second)"},
		{env: "SEARCHD_EVENT_STREAM_MAX_DURATION", flag: "event-stream-max-duration", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Streams.MaxDuration }, like: "15m or 1h"},
			meaning: "longest an event stream stays open; the client then reconnects with `Last-Event-ID` (the stream " +
				"set `retry:`) and misses nothing. Keep it below your proxies' idle and total timeouts"},
	}},
	{"Saved-search starts", "", []spec{
		{env: envSavedSearchLease, flag: "saved-search-lease", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.SavedSearchLease }, like: "30s or 3s"},
			meaning: "lease of a saved-search preparation: how long a start waits before it reclaims the key of a crashed " +
				"replica. A preparation is one short transaction, so the lease matters only after a crash; the retention " +
				"is raised to a longer lease, and the limit keeps one crash from blocking a key for long. For tests and " +
				"tuning"},
	}},
	{"Authentication", "The tokens the API accepts (docs/auth.md).", []spec{
		{env: envJWTSecret, secret: true, in: cmdServers | cmdToken,
			kind: text{at: func(c *loading) *string { return &c.JWTSecret }, check: jwtSecretProblem},
			def:  "required unless " + envOIDCIssuer + " is set", devDef: "generated, kept in the dev directory",
			values: fmt.Sprintf("at least %d bytes", auth.MinSecretLen),
			meaning: "HS256 secret the bearer tokens are signed with (generate one with `openssl rand -base64 48`); " +
				"`searchd token` signs with it",
			example: "CHANGE-ME"},
		{env: envTokenMaxLifetime, flag: "token-max-lifetime", in: cmdServers | cmdToken,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Auth.MaxLifetime }, like: "8h or 30m"},
			meaning: "longest a bearer token may live, HS256 or the provider's: `exp − iat`, and `exp − now`, at most this " +
				"(a longer token is refused); `searchd token --ttl` is held to it"},
		{env: envOIDCIssuer, flag: "oidc-issuer", in: cmdServers,
			kind: text{at: func(c *loading) *string { return &c.oidc.Issuer }, desc: "an https URL (http only on loopback)"},
			meaning: "issuer of the company's OpenID Connect provider, exactly as its tokens' `iss`: searchd discovers it " +
				"at start-up and accepts its RS256, ES256 and EdDSA access tokens"},
		{env: envOIDCAudience, flag: "oidc-audience", in: cmdServers,
			kind:    text{at: func(c *loading) *string { return &c.oidc.Audience }, desc: "a string, as the provider names the API"},
			def:     "none (required with the issuer)",
			meaning: "the identifier the provider gives searchd's API: an access token's `aud` must contain it"},
		{env: "SEARCHD_OIDC_ORG_CLAIM", flag: "oidc-org-claim", in: cmdServers,
			kind:    claimName(func(c *loading) *string { return &c.oidc.OrgClaim }),
			meaning: "claim holding the organization's UUID"},
		{env: "SEARCHD_OIDC_ACTOR_CLAIM", flag: "oidc-actor-claim", in: cmdServers,
			kind:    claimName(func(c *loading) *string { return &c.oidc.ActorClaim }),
			meaning: "claim naming the actor recorded with what a caller does"},
		{env: "SEARCHD_OIDC_ROLE_CLAIM", flag: "oidc-role-claim", in: cmdServers,
			kind:    claimName(func(c *loading) *string { return &c.oidc.RoleClaim }),
			meaning: "claim holding the person's roles: a string or an array of strings"},
		{env: "SEARCHD_OIDC_OPERATOR_ROLE", flag: "oidc-operator-role", in: cmdServers,
			kind:    text{at: func(c *loading) *string { return &c.oidc.OperatorRole }, desc: "a value of the role claim"},
			def:     "none: no provider token is an operator's",
			meaning: "value of the role claim that makes a person an operator of searchd (every organization's claims in the console)"},
		{env: "SEARCHD_OIDC_ADMIN_ROLE", flag: "oidc-admin-role", in: cmdServers,
			kind:    text{at: func(c *loading) *string { return &c.oidc.AdminRole }, desc: "a value of the role claim"},
			def:     "none: no provider token is an admin's",
			meaning: "value of the role claim that makes a person an admin of their organization, who creates, lists and revokes its service keys (/v1/service-keys)"},
	}},
	{"Console sign-in", "How people sign in to the console (docs/auth.md).", []spec{
		{env: envOIDCClientID, flag: "oidc-client-id", in: cmdServers,
			kind: text{at: func(c *loading) *string { return &c.signIn.ClientID }, desc: "a string, as the provider registered the console"},
			def:  "none: the console does not sign in through the provider",
			meaning: "the console's client id at the provider; it must not be the audience (the console's ID tokens would " +
				"be bearer tokens of the API)"},
		{env: "SEARCHD_OIDC_CLIENT_SECRET", secret: true, in: cmdServers,
			kind:    text{at: func(c *loading) *string { return &c.signIn.ClientSecret }, desc: "a string, as the provider issued it"},
			def:     "none: a public client (PKCE alone)",
			meaning: "the console's client secret at the provider"},
		{env: envOIDCRedirectURL, flag: "oidc-redirect-url", in: cmdServers,
			kind:    text{at: func(c *loading) *string { return &c.signIn.RedirectURL }, desc: "`https://HOST/console/oidc/callback`"},
			def:     "none (required with the client id)",
			meaning: "the console's callback, as registered at the provider"},
		{env: "SEARCHD_OIDC_SCOPES", flag: "oidc-scopes", in: cmdServers,
			kind:    text{at: func(c *loading) *string { return &c.scopes }, desc: "scopes separated by spaces"},
			meaning: "scopes the console asks for; `openid` is always asked for"},
		{env: "SEARCHD_CONSOLE_SESSION_LIFETIME", flag: "console-session-lifetime", in: cmdServers,
			kind:    field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Auth.SessionLifetime }, like: "8h or 30m"},
			meaning: "longest a console session lives (a pasted token's own `exp` may end it sooner)"},
		{env: envConsoleTokenSignIn, flag: "console-token-sign-in", in: cmdServers,
			kind: boolean{at: func(c *loading) *bool { return &c.Auth.TokenSignIn }},
			meaning: "whether a person may sign in to the console by pasting a bearer token: for development " +
				"(`searchd dev` turns it on)"},
	}},
	{"Provider callbacks", "Deliveries providers send back to searchd, and the inbox that keeps them.", []spec{
		{env: "SEARCHD_PROVIDER_SECRETS", secret: true, in: cmdServers,
			kind: custom{parse: parseProviderSecretsSetting,
				desc: "`provider=secret` pairs separated by commas, such as `acme=secret1,other=whsec_BASE64`; a name is " +
					"a lower-case dotted identifier"},
			def: "none: no provider may call back",
			meaning: "secrets provider callbacks are signed with (Standard Webhooks): a secret is used as its raw bytes, or, " +
				"written `whsec_` and base64 as Standard Webhooks prints them, as the decoded key"},
		{env: envCallbackMaxBodyBytes, flag: "callback-max-body-bytes", in: cmdServers,
			kind:   field[int64]{at: func(c *loading) *int64 { return &c.CallbackMaxBodyBytes }, of: "bytes"},
			def:    "1048576, or the body limit when lower",
			values: fmt.Sprintf("from %d to the body limit (%s)", minMaxBodyBytes, envMaxBodyBytes),
			meaning: "largest provider callback body: anyone can send a callback, and its body is held until its " +
				"signature is checked"},
		{env: "SEARCHD_CALLBACK_BODY_BUDGET", flag: "callback-body-budget", in: cmdServers,
			kind:   field[int64]{at: func(c *loading) *int64 { return &c.CallbackBodyBudget }, of: "bytes"},
			def:    "67108864, or twice the callback limit when more",
			values: fmt.Sprintf("from twice the callback limit to %d (16 GiB)", int64(maxCallbackBodyBudget)),
			meaning: "most bytes all callback bodies awaiting their signature check hold together; a body it cannot take " +
				"answers 503 `unavailable` at once, unread; bodies over 64 KiB share three quarters of it"},
		{env: "SEARCHD_CALLBACK_BODY_TIMEOUT", flag: "callback-body-timeout", in: cmdServers,
			kind:    field[time.Duration]{at: func(c *loading) *time.Duration { return &c.CallbackBodyTimeout }, like: "10s"},
			meaning: "longest a callback body may take to arrive after its headers; a slower one answers 503 `unavailable`"},
		{env: envProviderWebhookLease, flag: "provider-webhook-lease", was: renamed{"SEARCHD_WEBHOOK_LEASE", "webhook-lease"}, in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Inbox.Lease }, like: "5s or 1m"},
			meaning: "lease of a provider delivery: how long a replica applying it holds its claim and its inbox arrival " +
				"before another replica's applier takes it over; for tests and tuning"},
		{env: envApplierInterval, flag: "applier-interval", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Inbox.Applier.Interval }, none: true, like: "5s or 1m"},
			meaning: "time between two polls (plus up to a tenth) of the background applier, which applies the stored " +
				"provider deliveries a replica did not finish (crashed, stalled, failed); `0s` runs none in this process"},
		{env: envApplierBatch, flag: "applier-batch", in: cmdServers,
			kind:    field[int]{at: func(c *loading) *int { return &c.Inbox.Applier.Batch }},
			meaning: "most deliveries one poll of the applier takes"},
	}},
	{"Scheduled starts", "The drain that starts the saved searches whose schedule came due (docs/schedules.md).", []spec{
		{env: "SEARCHD_SCHEDULE_TICK", flag: "schedule-tick", in: cmdServers,
			kind:    field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Schedule.Interval }, none: true, like: "1s or 1m"},
			meaning: "time between two ticks of the drain (plus up to a tenth); `0s` runs none in this process"},
		{env: "SEARCHD_SCHEDULE_BATCH", flag: "schedule-batch", in: cmdServers,
			kind:    field[int]{at: func(c *loading) *int { return &c.Schedule.Batch }},
			meaning: "most occurrences one tick takes to start (and schedules it plans)"},
		{env: "SEARCHD_SCHEDULE_WIDTH", flag: "schedule-width", in: cmdServers,
			kind: field[int]{at: func(c *loading) *int { return &c.Schedule.Width }},
			meaning: "how many of a tick's occurrences are started at once; each start also takes a seat of its " +
				"organization in the seat queue"},
		{env: envScheduleLease, flag: "schedule-lease", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Schedule.Lease }, like: "1s or 1m"},
			def:  "twice the saved-search lease (" + (2 * idempotency.SavedSearchStartLease).String() + ")",
			meaning: "how long a tick holds the occurrences it took before another replica takes them over; it bounds the " +
				"tick's starts, and is longer than the saved-search lease, so that whoever takes over finds a dead " +
				"replica's claim reclaimable"},
		{env: "SEARCHD_SCHEDULE_RETRY", flag: "schedule-retry", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Schedule.RetryAfter }, like: "1s or 1m"},
			meaning: "when an occurrence whose start failed for a transient reason (`not_ready`) is tried again; for tests " +
				"and tuning"},
		{env: "SEARCHD_SCHEDULE_MAX_PER_ORG", flag: "schedule-max-per-org", in: cmdServers,
			kind:    field[int]{at: func(c *loading) *int { return &c.ScheduleMax }},
			meaning: "most schedules one organization may have; setting one more answers 409 `schedule_limit`"},
	}},
	{"Dispatch to the runtime", "How every admitted Run reaches the runtime that executes it (docs/runtime.md). Every " +
		"replica with a runtime runs a dispatcher; they share the outbox.", []spec{
		{env: envRuntimeURL, flag: "runtime-url", in: cmdServers,
			kind: text{at: func(c *loading) *string { return &c.Dispatch.URL }, check: runtimeURLProblem,
				desc: "an absolute http or https URL; as a flag, without credentials"},
			def: "none: dispatch is off, Runs stay queued",
			meaning: "the runtime's endpoint: every admitted Run is POSTed to it as a signed Standard Webhooks message " +
				"whose `webhook-id` is the Run id, until it answers 2xx. Unset, dispatch is off: Runs are admitted and stay " +
				"`queued` with their dispatch pending, for a replica with a runtime to deliver; `serve` warns at start and " +
				"every 5 minutes while Runs are pending, `searchd_dispatch_enabled` is 0 and the console shows a notice. As a " +
				"flag it must hold no credentials (`ps` shows flags)"},
		{env: envRuntimeSecret, secret: true, in: cmdServers,
			kind: custom{parse: parseRuntimeSecret,
				desc: fmt.Sprintf("`whsec_` and the standard base64 of at least %d random bytes (`echo whsec_$(openssl rand -base64 32)`), "+
					"or at least %d bytes used as they are", dispatch.MinSecretLen, dispatch.MinSecretLen)},
			def:     "required with " + envRuntimeURL,
			meaning: "the secret deliveries are signed with (Standard Webhooks), which the runtime verifies every delivery with"},
		{env: "SEARCHD_RUNTIME_TIMEOUT", flag: "runtime-timeout", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Dispatch.Timeout }, like: "10s or 1m"},
			meaning: "how long one delivery waits for the runtime's answer; no answer in time is a retry. A delivery's " +
				"lease is this plus a quarter of it, at least 5 s more (15 s by default)"},
		{env: envDispatchInterval, flag: "dispatch-interval", in: cmdServers,
			kind:    field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Dispatch.Interval }, like: "10s or 1m"},
			meaning: "time between two lease passes of the dispatcher while nothing is due; a start on the same replica wakes it at once"},
		{env: "SEARCHD_DISPATCH_BATCH", flag: "dispatch-batch", in: cmdServers,
			kind:    field[int]{at: func(c *loading) *int { return &c.Dispatch.Batch }},
			meaning: "most dispatches one lease pass takes"},
		{env: "SEARCHD_DISPATCH_CONCURRENCY", flag: "dispatch-concurrency", in: cmdServers,
			kind:    field[int]{at: func(c *loading) *int { return &c.Dispatch.Concurrency }},
			meaning: "most deliveries in flight in this process; a pass leases no more than the free slots, so nothing leased waits for one"},
		{env: "SEARCHD_DISPATCH_MAX_BACKOFF", flag: "dispatch-max-backoff", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Dispatch.MaxBackoff }, like: "30s or 5m"},
			meaning: "the longest wait before a delivery is retried (after a 5xx, 408, 429, timeout or cut connection); the " +
				"wait is " + dispatch.DefaultMinBackoff.String() + " after the first attempt and doubles, drawn between half " +
				"and all of it, and a `Retry-After` of the runtime is honoured up to this"},
	}},
	{"Webhooks", "How Run events reach the webhook endpoints organizations create (docs/webhooks.md). Every replica runs " +
		"a worker; they share the deliveries.", []spec{
		{env: "SEARCHD_WEBHOOK_TIMEOUT", flag: "webhook-timeout", in: cmdServers,
			kind:    field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Webhooks.Worker.Timeout }, like: "10s or 30s"},
			meaning: "how long one delivery waits for the endpoint's answer; no answer in time is a failed attempt, retried"},
		{env: "SEARCHD_WEBHOOK_CONCURRENCY", flag: "webhook-concurrency", in: cmdServers,
			kind:    field[int]{at: func(c *loading) *int { return &c.Webhooks.Worker.Concurrency }},
			meaning: "most webhook deliveries in flight in this process"},
		{env: "SEARCHD_WEBHOOK_MAX_BACKOFF", flag: "webhook-max-backoff", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Webhooks.Worker.MaxBackoff }, like: "10m or 1h"},
			meaning: "the longest wait before a failed delivery is tried again; the wait is " + webhooks.DefaultMinBackoff.String() +
				" after the first failed attempt and doubles, drawn between half and all of it; an endpoint's `Retry-After` is " +
				"honoured up to this"},
		{env: "SEARCHD_WEBHOOK_DISABLE_AFTER", flag: "webhook-disable-after", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Webhooks.Worker.DisableAfter }, like: "72h or 24h"},
			meaning: "how long an endpoint may fail every attempt before it is disabled (with the reason); its deliveries then " +
				"wait until someone enables it again"},
		{env: "SEARCHD_WEBHOOK_ALLOW_HTTP_LOOPBACK", flag: "webhook-allow-http-loopback", in: cmdServers,
			kind: boolean{at: func(c *loading) *bool { return &c.Webhooks.AllowHTTPLoopback }},
			meaning: "whether a webhook endpoint may be `http://` to a loopback host (localhost, 127.0.0.1, ::1), for development; " +
				"otherwise every endpoint is https (`searchd dev` turns it on)"},
	}},
	{"Sweeper", "The sweeper deletes the claims, Runs, snapshots and dropped deliveries past their retention, in bounded " +
		"passes until none is left or its budget runs out: inside serve and dev every interval (at once again while a " +
		"backlog remains), or once per `searchd sweep` from an outside scheduler.", []spec{
		{env: envSweepInterval, flag: "sweep-interval", in: cmdServers,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Sweep.Interval }, none: true, short: true, like: "1h or 30m, or 0s to run no sweeper"},
			meaning: "time between a run of the in-process sweeper that drained everything and the next (after a run whose " +
				"budget ran out, the next starts at once); the first run is within the jitter of start. `0s` " +
				"runs no sweeper: then run `searchd sweep` from an outside scheduler (cron, a Kubernetes CronJob)"},
		{env: envSweepJitter, flag: "sweep-jitter", in: cmdServers,
			kind: custom{parse: parseSweepJitter, desc: "from 0s (none) to the sweep interval"},
			def: fmt.Sprintf("10%% of the interval (%s at %s)", shortDuration(sweeper.DefaultInterval/10),
				shortDuration(sweeper.DefaultInterval)),
			meaning: "most random delay added to each wait of the sweeper, so replicas started together do not sweep in lock-step"},
		{env: envSweepBound, flag: "sweep-bound", in: cmdServers | cmdSweep,
			kind:   field[int]{at: func(c *loading) *int { return &c.Sweep.Bound }},
			def:    fmt.Sprintf("%d, or the ceiling when that is lower", sweeper.DefaultBound),
			values: "from 1 to the ceiling (--sweep-max-bound)",
			meaning: "most rows one sweeper pass reads, and so deletes, from one table. A bound over the ceiling is " +
				"refused at start-up (exit status 2), never clamped"},
		{env: envSweepMaxBound, flag: "sweep-max-bound", in: cmdServers | cmdSweep,
			kind:    field[int]{at: func(c *loading) *int { return &c.Sweep.MaxBound }},
			meaning: "ceiling on the sweep bound: a guard against a bound set by mistake so large that one pass would hold its table for long"},
		{env: envSweepBudget, flag: "sweep-budget", in: cmdServers | cmdSweep,
			kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Sweep.Budget }, short: true, like: "15m or 1h"},
			meaning: "how long one sweeper run goes on making passes while rows past retention remain (every table is " +
				"swept at least once, whatever it is). A run that drains everything ends sooner; one whose budget runs out " +
				"leaves a backlog and logs a warning, and serve starts its next run at once. A run is logged and recorded " +
				"for the console when it ends, so the budget is how often a long drain reports"},
		{env: envSweepDuty, flag: "sweep-duty", in: cmdServers | cmdSweep,
			kind: field[float64]{at: func(c *loading) *float64 { return &c.Sweep.Duty }, like: "0.25"},
			meaning: "most of a run's time spent in passes: after each pass that reads a full bound the run rests in " +
				"proportion (0.25 rests three times the pass), so a long sweep leaves the database to the claim path; " +
				"`1` runs passes back to back"},
	}},
	{"Logs and traces", "", []spec{
		{env: "SEARCHD_LOG_LEVEL", flag: "log-level", in: cmdLogging,
			kind:    custom{parse: parseLogLevel, lit: "info", desc: "`debug`, `info`, `warn` or `error`"},
			meaning: "the least severe level logged, on stderr"},
		{env: "SEARCHD_LOG_FORMAT", flag: "log-format", in: cmdLogging,
			kind:    custom{parse: parseLogFormat, lit: "json", devLit: "text", desc: "`json` or `text`"},
			meaning: "the format of the log on stderr"},
		{env: envOTelTracesEndpoint, in: cmdServers, kind: custom{desc: "an `http://` or `https://` URL"},
			def: "none: tracing is off",
			meaning: "OTLP/HTTP endpoint of the traces, used as it is; tracing is on only when it (or " + envOTelEndpoint +
				") is set, and " + envOTelSDKDisabled + " is not true"},
		{env: envOTelEndpoint, in: cmdServers, kind: custom{desc: "an `http://` or `https://` URL"},
			def:     "none",
			meaning: "OTLP/HTTP endpoint, which `/v1/traces` is appended to, when " + envOTelTracesEndpoint + " is not set"},
		{env: envOTelTracesProtocol, in: cmdServers, kind: custom{desc: "`http/protobuf`"},
			def:     "the value of " + envOTelProtocol + ", else http/protobuf",
			meaning: "the OTLP protocol of the traces: searchd exports over HTTP with protobuf alone"},
		{env: envOTelProtocol, in: cmdServers, kind: custom{desc: "`http/protobuf`"},
			def:     "http/protobuf",
			meaning: "the OTLP protocol, when " + envOTelTracesProtocol + " is not set"},
		{env: envOTelTracesExporter, in: cmdServers, kind: custom{desc: "`otlp` or `none`"},
			def:     "otlp",
			meaning: "`none` turns tracing off"},
		{env: envOTelSDKDisabled, in: cmdServers, kind: custom{desc: "`true` or `false`"},
			def:     "false",
			meaning: "`true` turns tracing off"},
		{env: envOTelServiceName, in: cmdServers, kind: custom{desc: "a name"},
			def: "searchd",
			meaning: "`service.name` of the spans; the SDK's other `OTEL_*` variables apply too (`OTEL_EXPORTER_OTLP_HEADERS`, " +
				"`_TIMEOUT`, `_COMPRESSION`, `_CERTIFICATE` and their `TRACES_` forms, `OTEL_RESOURCE_ATTRIBUTES`, " +
				"`OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`)"},
	}},
	{"Development", "Read by `searchd dev` alone.", []spec{
		{env: envDevDir, flag: "dev-dir", in: cmdDev,
			kind:    text{at: func(c *loading) *string { return &c.DevDir }, desc: "a directory"},
			meaning: "directory of the local cluster, its log and the dev secret"},
		{env: "SEARCHD_PG_BIN", flag: "pg-bin", in: cmdDev,
			kind:    text{at: func(c *loading) *string { return &c.PGBin }, desc: "a directory"},
			def:     "searched: pg_config --bindir, /usr/lib/postgresql/*/bin, PATH",
			meaning: "directory of `initdb` and `postgres` (the tests read it too)"},
	}},
}

// removedSettings are the variables no longer read, so a deployment that
// still sets them is told: the limits the seat queue replaced, and
// the sweeper's passes per run, which its budget replaced.
var removedSettings = []struct{ env, why string }{
	{"SEARCHD_ORG_MAX_IN_FLIGHT", "the cap on one organization's requests in flight on a process (flag " +
		"--org-max-in-flight); the seat queue serves each organization in turn instead (docs/seat-queue.md)"},
	{"SEARCHD_MAX_IN_FLIGHT", "the CPU-pressure rule (flag --max-in-flight), the heaviest organization giving way; " +
		"to bound concurrency, set " + envSeats},
	{"SEARCHD_SWEEP_MAX_PASSES", "the most passes a sweeper run made on one table (flag --sweep-max-passes); a run " +
		"now sweeps until nothing is due or " + envSweepBudget + " runs out, and serve runs again at once while a backlog remains"},
}

// warnRemovedSettings logs a warning for each of removedSettings that is
// set, saying what replaced it, and for each old name of a setting used
// (renamed, from the loaded configuration).
func warnRemovedSettings(logger *slog.Logger, getenv func(string) string, renamed []string) {
	for _, r := range removedSettings {
		if getenv(r.env) != "" {
			logger.Warn(r.env+" is no longer read: "+r.why, slog.String("setting", r.env))
		}
	}
	for _, msg := range renamed {
		logger.Warn(msg, slog.String("setting", strings.TrimPrefix(strings.Fields(msg)[0], "--")))
	}
}

// checkSettings checks what the settings of command c say of one
// another, once every one was read.
func checkSettings(r *reader, c cmds) {
	if c&cmdServers != 0 {
		r.cfg.CallbackMaxBodyBytes, r.cfg.CallbackBodyBudget = r.cfg.callbackLimits()
		checkAuthSettings(r)
		checkScheduleLease(r)
	}
	if c&(cmdServers|cmdSweep) != 0 {
		checkSweepBound(r)
	}
}

// sessionTimeout is the kind of PostgreSQL's session bounds, whole
// milliseconds as PostgreSQL takes them; 0s is none.
func sessionTimeout(at func(*loading) *time.Duration) field[time.Duration] {
	return field[time.Duration]{at: at, none: true, like: "5s or 1m"}
}

// addrProblem checks a listen address.
func addrProblem(s setting) string {
	_, port, err := net.SplitHostPort(s.value)
	if err != nil {
		return fmt.Sprintf("%q is not a host:port address (for example :8080 or 127.0.0.1:8080)", s.value)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Sprintf("port %q is not a number from 0 to 65535", port)
	}
	return ""
}

// passwordInDSN matches the password keyword of a keyword/value
// connection string.
var passwordInDSN = regexp.MustCompile(`(^|\s)password\s*=`)

// holdsPassword reports whether the connection string dsn carries a
// password, in a URL's user info or query, or as a keyword.
func holdsPassword(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return strings.Contains(dsn, "@") // unparseable: assume the worst
		}
		_, has := u.User.Password()
		return has || u.Query().Has("password")
	}
	return passwordInDSN.MatchString(dsn)
}

// databaseURLProblem checks the connection string a setting holds and
// returns what is wrong with it, or "". None of the messages quotes the
// string, which may hold a password.
func databaseURLProblem(s setting) string {
	if _, err := pgxpool.ParseConfig(s.value); err != nil {
		// The parser's message may quote the string, password and all.
		return "is not a valid PostgreSQL connection string (postgres://user:password@host:port/database)"
	}
	if strings.HasPrefix(s.name, "--") && holdsPassword(s.value) {
		return "holds a password, which every local user can read in the process list; set " + envDatabaseURL +
			" instead, or give the password in PGPASSWORD or a ~/.pgpass file"
	}
	return ""
}

// parseLogLevel reads the log level: info by default.
func parseLogLevel(r *reader, s setting) string {
	parse := func(v string) (l slog.Level, err error) { return l, l.UnmarshalText([]byte(v)) }
	return setValue(&r.cfg.LogLevel, s, slog.LevelInfo, parse, "a level: use debug, info, warn or error", nil)
}

// parseLogFormat reads the log format: json by default, text in dev.
func parseLogFormat(r *reader, s setting) string {
	parse := func(v string) (string, error) {
		if f := strings.ToLower(v); f == "json" || f == "text" {
			return f, nil
		}
		return "", errors.ErrUnsupported
	}
	return setValue(&r.cfg.LogFormat, s, devOr(r.dev, "text", "json"), parse, "a log format: use json or text", nil)
}

const maxClaimNameLen = 100

// claimName is the kind of the settings that name a claim of the
// provider's tokens.
func claimName(at func(*loading) *string) text {
	return text{at: at, desc: fmt.Sprintf("a claim name: at most %d bytes, no spaces", maxClaimNameLen),
		check: func(s setting) string {
			if len(s.value) > maxClaimNameLen || strings.ContainsFunc(s.value, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
				return fmt.Sprintf("%q is not a claim name: at most %d bytes, no spaces", s.value, maxClaimNameLen)
			}
			return ""
		}}
}

// jwtSecretProblem checks the length of the HS256 secret.
func jwtSecretProblem(s setting) string {
	if err := (auth.Config{Secret: []byte(s.value)}).Validate(); err != nil {
		return err.Error()
	}
	return ""
}

// checkAuthSettings assembles the provider of the API's tokens and the
// console's registration at it from their settings, when they are set,
// and checks what the settings say of one another: the secret is
// required unless a provider is configured (or dev generates it).
func checkAuthSettings(r *reader) {
	c := r.cfg
	c.Auth.OIDC = checkOIDCSettings(r)
	c.Auth.SignIn = checkSignInSettings(r, c.Auth.OIDC)
	if c.JWTSecret == "" && !r.dev && c.Auth.OIDC == nil {
		r.bad(r.given[envJWTSecret], "is required (unless %s is set): at least %d bytes of secret for HS256 tokens "+
			"(generate one with `openssl rand -base64 48`)", envOIDCIssuer, auth.MinSecretLen)
	}
}

// checkOIDCSettings returns the provider of the API's tokens: nil when no
// issuer is set.
func checkOIDCSettings(r *reader) *auth.OIDCConfig {
	issuer, audience := r.given[envOIDCIssuer], r.given[envOIDCAudience]
	switch {
	case issuer.value == "" && audience.value != "":
		r.bad(audience, "is set without %s: name the provider whose tokens carry it", envOIDCIssuer)
		return nil
	case issuer.value == "":
		return nil
	}
	if err := auth.CheckProviderURL(issuer.value); err != nil {
		r.bad(issuer, "%v", err)
	}
	if audience.value == "" {
		r.bad(audience, "is required with %s: the identifier the provider gives searchd's API (an access token's aud)", envOIDCIssuer)
	}
	o := r.cfg.oidc
	return &o
}

// checkSignInSettings returns the console's registration at the provider
// o: nil when neither the client id nor the redirect URL is set.
func checkSignInSettings(r *reader, o *auth.OIDCConfig) *auth.SignInConfig {
	client, redirect := r.given[envOIDCClientID], r.given[envOIDCRedirectURL]
	if client.value == "" && redirect.value == "" {
		return nil
	}
	switch {
	case o == nil:
		r.bad(client, "needs %s: the console signs in through the provider it names", envOIDCIssuer)
	case client.value == "":
		r.bad(client, "is required with %s", envOIDCRedirectURL)
	case client.value == o.Audience:
		r.bad(client, "is the API's audience (%s): the console's ID tokens would be bearer tokens of the API; "+
			"register the console as a client of its own", envOIDCAudience)
	}
	if err := auth.CheckProviderURL(redirect.value); err != nil {
		r.bad(redirect, "%v (the console's callback, https://HOST/console/oidc/callback)", err)
	}
	si := r.cfg.signIn
	si.Scopes = strings.Fields(r.cfg.scopes)
	return &si
}

// runtimeURLProblem checks the runtime's endpoint, as dispatch.Config
// does; a flag's must hold no credentials. No message quotes it.
func runtimeURLProblem(s setting) string {
	if err := dispatchProblem(dispatch.Config{URL: s.value}, "URL"); err != "" {
		return err
	}
	if u, _ := url.Parse(s.value); strings.HasPrefix(s.name, "--") && u.User != nil {
		return "holds credentials, which every local user can read in the process list; set " + envRuntimeURL + " instead"
	}
	return ""
}

// dispatchProblem is what c's Validate says of its field name, or "".
func dispatchProblem(c dispatch.Config, name string) string {
	if err := c.Validate(); err != nil && strings.HasPrefix(err.Error(), "dispatch: Config."+name+" ") {
		return err.Error()
	}
	return ""
}

// parseRuntimeSecret reads the secret deliveries are signed with, which
// the runtime's URL (read before it) requires, and which is set with it
// alone. No message quotes it.
func parseRuntimeSecret(r *reader, s setting) string {
	key, err := providerSecret(s.value)
	u := r.given[envRuntimeURL]
	switch {
	case u.value == "" && s.value != "":
		return "is set but " + envRuntimeURL + " is not: set both to turn dispatch on, or neither"
	case u.value == "":
		return ""
	case s.value == "":
		return fmt.Sprintf("is required with %s: the secret the runtime verifies every delivery with "+
			"(whsec_ and the base64 of %d random bytes or more: echo whsec_$(openssl rand -base64 32))", u.name, dispatch.MinSecretLen)
	case err != nil:
		return err.Error()
	}
	if p := dispatchProblem(dispatch.Config{URL: u.value, Secret: key}, "Secret"); p != "" {
		return p
	}
	r.cfg.Dispatch.Secret = key
	return ""
}

// checkScheduleLease sets the schedule lease's default, twice the
// saved-search lease, and checks that a drain that runs holds what it took
// longer than the saved-search lease.
func checkScheduleLease(r *reader) {
	c := r.cfg
	c.Schedule.Lease = cmp.Or(c.Schedule.Lease, max(2*c.SavedSearchLease, schedule.MinLease))
	if c.Schedule.Interval > 0 && c.Schedule.Lease <= c.SavedSearchLease {
		r.bad(r.given[envScheduleLease], "%s must be longer than the saved-search lease, %s (%s): a replica "+
			"that takes over an occurrence must find the start claim of one that died reclaimable",
			c.Schedule.Lease, r.name(envSavedSearchLease), c.SavedSearchLease)
	}
}
