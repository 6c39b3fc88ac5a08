package telemetry

import (
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every metric searchd defines itself.
const namespace = "searchd"

// Metrics are the Prometheus metrics of one searchd process, on a registry
// of their own. A *Metrics is an idempotency.Observer, a
// providerjobs.Observer, a sweeper.Observer, a seatq.Observer, a
// schedule.Observer (the drain of scheduled starts), a dispatch.Observer
// and a dispatch.BacklogObserver; give the same value to all of them and to the API,
// which serves [Metrics.Handler]. It is safe for
// concurrent use; its Observe methods never block.
type Metrics struct {
	reg *prometheus.Registry

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	claims     *prometheus.CounterVec
	reclaims   *prometheus.CounterVec
	fencesLost *prometheus.CounterVec

	webhookDrops  *prometheus.CounterVec
	auditFailures *prometheus.CounterVec

	inboxPending prometheus.Gauge
	inboxLag     prometheus.Gauge
	inboxApplied *prometheus.CounterVec
	inboxCopies  *prometheus.CounterVec

	sweptRead    *prometheus.CounterVec
	sweptDeleted *prometheus.CounterVec
	sweepPass    *prometheus.HistogramVec
	sweepFull    *prometheus.CounterVec

	admission *seatMetrics

	dispatchEnabled  prometheus.Gauge
	dispatchPending  prometheus.Gauge
	dispatchFailed   prometheus.Gauge
	dispatchOldest   prometheus.Gauge
	dispatchAttempts *prometheus.CounterVec
	dispatchDuration *prometheus.HistogramVec
	scheduleCameDue  prometheus.Counter
	scheduleOutcomes *prometheus.CounterVec
	scheduleDue      prometheus.Gauge
	scheduleLag      prometheus.Gauge
	scheduleTick     prometheus.Histogram
}

// NewMetrics returns metrics on a fresh registry with the Go runtime and
// process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{promauto.With(reg)}
	return &Metrics{
		reg: reg,
		httpRequests: f.counterVec("http", "requests_total",
			"HTTP requests answered, by route pattern (\"unmatched\" when no route matched), method and status.", "route", "method", "status"),
		httpDuration: f.histogramVec("http", "request_duration_seconds",
			"Time to answer an HTTP request, by route pattern and method.", "route", "method"),
		claims: f.counterVec("", "claims_total",
			"Idempotency claims, by scope and outcome kind (claimed, completed, processing, conflict, absent).", "scope", "kind"),
		reclaims: f.counterVec("", "claim_reclaims_total",
			"Claims taken over from a worker whose lease had passed, by scope.", "scope"),
		fencesLost: f.counterVec("", "claim_fences_lost_total",
			"Completes and releases refused because the claim's lease had moved on, by scope and op (complete, release).", "scope", "op"),
		webhookDrops: f.counterVec("", "webhook_drops_total",
			"Provider callbacks dropped, by provider and reason.", "provider", "reason"),
		auditFailures: f.counterVec("", "webhook_drop_audit_failures_total",
			"Drops of provider callbacks the audit (agent.webhook_drops) failed to record, by provider and reason; the deliveries were acknowledged all the same.", "provider", "reason"),
		inboxPending: f.gauge("inbox", "pending",
			"Provider deliveries stored in the inbox and not yet applied or dropped, read by the applier at each poll."),
		inboxLag: f.gauge("inbox", "lag_seconds",
			"Age of the oldest pending delivery in the inbox (0 when none), by the database clock: the applier's lag."),
		inboxApplied: f.counterVec("inbox", "applied_total",
			"Provider deliveries applied from the inbox, by provider and by whom (handler: right after landing; applier: after the handler's lease passed).", "provider", "by"),
		inboxCopies: f.counterVec("inbox", "copies_total",
			"Copies of deliveries stored in the inbox already, by provider and the reason each was dropped for (duplicate, hash_mismatch, path_mismatch).", "provider", "reason"),
		sweptRead: f.counterVec("sweeper", "rows_read_total",
			"Expired rows the sweeper read, by table.", "table"),
		sweptDeleted: f.counterVec("sweeper", "rows_deleted_total",
			"Expired rows the sweeper deleted, by table.", "table"),
		sweepPass: f.histogramVec("sweeper", "pass_duration_seconds",
			"Time of one committed sweeper pass, by table.", "table"),
		sweepFull: f.counterVec("sweeper", "backlog_passes_total",
			"Sweeper passes whose read filled the bound, leaving rows past retention behind, by table.", "table"),
		admission: newSeatMetrics(f),
		dispatchEnabled: f.gauge("dispatch", "enabled",
			"1 when this process dispatches admitted Runs to the runtime (SEARCHD_RUNTIME_URL is set), 0 when it does not."),
		dispatchPending: f.gauge("dispatch", "pending",
			"Admitted Runs whose dispatch to the runtime is pending (not yet acknowledged), in the whole outbox, counted every 15 s by every process whether or not it dispatches."),
		dispatchFailed: f.gauge("dispatch", "failed",
			"Dispatches the runtime refused (a 4xx other than 408 and 429), waiting for an operator's retry; counted every 15 s."),
		dispatchOldest: f.gauge("dispatch", "oldest_pending_seconds",
			"Age of the oldest pending dispatch's Run (0 when none), by the database clock: how far delivery lags behind admission."),
		dispatchAttempts: f.counterVec("dispatch", "attempts_total",
			"Delivery attempts of Runs to the runtime, by outcome (delivered, retry, failed).", "outcome"),
		dispatchDuration: f.histogramVec("dispatch", "attempt_duration_seconds",
			"Time of one delivery attempt (reading the message, the runtime's answer, recording it), by outcome.", "outcome"),
		scheduleCameDue: f.counter("schedule", "came_due_total",
			"Occurrences of schedules that came due, as the drain planned them."),
		scheduleOutcomes: f.counterVec("schedule", "outcomes_total",
			"Outcomes the drain recorded for occurrences of schedules, by outcome (started, refused, not_ready, missed) and reason (of a refusal or a not-ready attempt; empty otherwise).", "outcome", "reason"),
		scheduleDue: f.gauge("schedule", "due",
			"Open occurrences of schedules whose attempt is due now, read after each tick of the drain."),
		scheduleLag: f.gauge("schedule", "lag_seconds",
			"How long the oldest due work of the drain (an occurrence to start, a schedule to plan) has waited, by the database clock; 0 when none waits."),
		scheduleTick: f.histogram("schedule", "tick_duration_seconds",
			"Time of one tick of the drain: its plan, its take and the starts of what it took."),
	}
}

// factory registers metrics under namespace on one registry.
type factory struct{ promauto.Factory }

func (f factory) counter(subsystem, name, help string) prometheus.Counter {
	return f.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help})
}

func (f factory) counterVec(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return f.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func (f factory) gauge(subsystem, name, help string) prometheus.Gauge {
	return f.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help})
}

func (f factory) histogram(subsystem, name, help string) prometheus.Histogram {
	return f.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: prometheus.DefBuckets,
	})
}

func (f factory) histogramVec(subsystem, name, help string, labels ...string) *prometheus.HistogramVec {
	return f.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: prometheus.DefBuckets,
	}, labels)
}

// WatchPool exports pool's statistics, read at each scrape. It returns an
// error for a second pool: the series have no pool label.
func (m *Metrics) WatchPool(pool *pgxpool.Pool) error {
	return m.reg.Register(newPoolCollector(pool))
}

// Handler serves the metrics; a failing collector is left out rather
// than failing the scrape.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg, // counts the scrapes that failed
	})
}

// ObserveRequest records one answered HTTP request. route (a pattern or
// "unmatched") and method must come from bounded sets: each value is a
// series kept for the process's life.
func (m *Metrics) ObserveRequest(route, method string, status int, d time.Duration) {
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

// ObserveClaim implements idempotency.Observer.
func (m *Metrics) ObserveClaim(scope, kind string, reclaimed bool) {
	m.claims.WithLabelValues(scope, kind).Inc()
	if reclaimed {
		m.reclaims.WithLabelValues(scope).Inc()
	}
}

// ObserveFenceLost implements idempotency.Observer.
func (m *Metrics) ObserveFenceLost(scope, op string) {
	m.fencesLost.WithLabelValues(scope, op).Inc()
}

// ObserveDrop implements providerjobs.Observer.
func (m *Metrics) ObserveDrop(provider, reason string) {
	m.webhookDrops.WithLabelValues(provider, reason).Inc()
}

// ObserveApplied implements providerjobs.Observer.
func (m *Metrics) ObserveApplied(provider, by string) {
	m.inboxApplied.WithLabelValues(provider, by).Inc()
}

// ObserveCopy implements providerjobs.Observer.
func (m *Metrics) ObserveCopy(provider, reason string) {
	m.inboxCopies.WithLabelValues(provider, reason).Inc()
}

// ObserveAuditFailure implements providerjobs.Observer.
func (m *Metrics) ObserveAuditFailure(provider, reason string) {
	m.auditFailures.WithLabelValues(provider, reason).Inc()
}

// ObserveInbox implements providerjobs.Observer.
func (m *Metrics) ObserveInbox(pending int64, oldest time.Duration) {
	m.inboxPending.Set(float64(pending))
	m.inboxLag.Set(oldest.Seconds())
}

// ObservePass implements sweeper.Observer.
func (m *Metrics) ObservePass(table string, read, deleted int, d time.Duration) {
	m.sweptRead.WithLabelValues(table).Add(float64(read))
	m.sweptDeleted.WithLabelValues(table).Add(float64(deleted))
	m.sweepPass.WithLabelValues(table).Observe(d.Seconds())
}

// ObserveBacklogPass implements sweeper.BacklogObserver.
func (m *Metrics) ObserveBacklogPass(table string) {
	m.sweepFull.WithLabelValues(table).Inc()
}

// ObserveDispatchAttempt implements dispatch.Observer. It has no
// organization label, to keep series bounded.
func (m *Metrics) ObserveDispatchAttempt(outcome string, d time.Duration) {
	m.dispatchAttempts.WithLabelValues(outcome).Inc()
	m.dispatchDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

// ObserveDispatchBacklog implements dispatch.BacklogObserver.
func (m *Metrics) ObserveDispatchBacklog(pending, failed int64, oldest time.Duration) {
	m.dispatchPending.Set(float64(pending))
	m.dispatchFailed.Set(float64(failed))
	m.dispatchOldest.Set(oldest.Seconds())
}

// ObserveDispatching implements dispatch.BacklogObserver:
// searchd_dispatch_enabled, so an alert on a backlog can say why.
func (m *Metrics) ObserveDispatching(on bool) {
	v := 0.0
	if on {
		v = 1
	}
	m.dispatchEnabled.Set(v)
}

// ObserveCameDue implements schedule.Observer.
func (m *Metrics) ObserveCameDue(n int) { m.scheduleCameDue.Add(float64(n)) }

// ObserveOutcome implements schedule.Observer; outcome and reason come
// from bounded sets.
func (m *Metrics) ObserveOutcome(outcome, reason string) {
	m.scheduleOutcomes.WithLabelValues(outcome, reason).Inc()
}

// ObserveDrain implements schedule.Observer.
func (m *Metrics) ObserveDrain(due int64, lag, tick time.Duration) {
	m.scheduleDue.Set(float64(due))
	m.scheduleLag.Set(lag.Seconds())
	m.scheduleTick.Observe(tick.Seconds())
}
