package telemetry

import (
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/searchd/searchd/idempotency"
)

// namespace prefixes every metric searchd defines itself.
const namespace = "searchd"

// Metrics are the Prometheus metrics of one searchd process, on a registry
// of their own. A *Metrics is an idempotency.Observer, a
// providerjobs.Observer, a sweeper.Observer, a fairq.Observer, a
// schedule.Observer (the drain of scheduled starts) and a
// dispatch.Observer; give the same value to all of them and to the API,
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

	admission *admissionMetrics

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

// NewMetrics returns the metrics of a process on a fresh registry that
// also holds the Go runtime and process collectors. Call
// [Metrics.WatchPool] to add the database pool's gauges.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests answered, by route pattern (\"unmatched\" when no route matched), method and status.",
		}, []string{"route", "method", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "claims_total",
			Help: "Idempotency claims, by scope and outcome kind (claimed, completed, processing, conflict, absent).",
		}, []string{"scope", "kind"}),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "claim_reclaims_total",
			Help: "Claims taken over from a worker whose lease had passed, by scope.",
		}, []string{"scope"}),
		fencesLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "claim_fences_lost_total",
			Help: "Completes and releases refused because the claim's lease had moved on, by scope and op (complete, release).",
		}, []string{"scope", "op"}),
		webhookDrops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "webhook_drops_total",
			Help: "Provider callbacks dropped, by provider and reason.",
		}, []string{"provider", "reason"}),
		auditFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "webhook_drop_audit_failures_total",
			Help: "Drops of provider callbacks the audit (agent.webhook_drops) failed to record, by provider and reason; the deliveries were acknowledged all the same.",
		}, []string{"provider", "reason"}),
		inboxPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "inbox", Name: "pending",
			Help: "Provider deliveries stored in the inbox and not yet applied or dropped, read by the applier at each poll.",
		}),
		inboxLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "inbox", Name: "lag_seconds",
			Help: "Age of the oldest pending delivery in the inbox (0 when none), by the database clock: the applier's lag.",
		}),
		inboxApplied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "inbox", Name: "applied_total",
			Help: "Provider deliveries applied from the inbox, by provider and by whom (handler: right after landing; applier: after the handler's lease passed).",
		}, []string{"provider", "by"}),
		inboxCopies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "inbox", Name: "copies_total",
			Help: "Copies of deliveries stored in the inbox already, by provider and the reason each was dropped for (duplicate, hash_mismatch, path_mismatch).",
		}, []string{"provider", "reason"}),
		sweptRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "sweeper", Name: "rows_read_total",
			Help: "Expired rows the sweeper read, by table.",
		}, []string{"table"}),
		sweptDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "sweeper", Name: "rows_deleted_total",
			Help: "Expired rows the sweeper deleted, by table.",
		}, []string{"table"}),
		sweepPass: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "sweeper", Name: "pass_duration_seconds",
			Help:    "Time of one committed sweeper pass, by table.",
			Buckets: prometheus.DefBuckets,
		}, []string{"table"}),
		sweepFull: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "sweeper", Name: "backlog_passes_total",
			Help: "Sweeper passes whose read filled the bound, leaving rows past retention behind, by table.",
		}, []string{"table"}),
		admission: newAdmissionMetrics(),
		dispatchPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "dispatch", Name: "pending",
			Help: "Admitted Runs whose dispatch to the runtime is pending (not yet acknowledged), counted by the dispatcher every 15 s.",
		}),
		dispatchFailed: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "dispatch", Name: "failed",
			Help: "Dispatches the runtime refused (a 4xx other than 408 and 429), waiting for an operator's retry; counted every 15 s.",
		}),
		dispatchOldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "dispatch", Name: "oldest_pending_seconds",
			Help: "Age of the oldest pending dispatch's Run (0 when none), by the database clock: how far delivery lags behind admission.",
		}),
		dispatchAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "dispatch", Name: "attempts_total",
			Help: "Delivery attempts of Runs to the runtime, by outcome (delivered, retry, failed).",
		}, []string{"outcome"}),
		dispatchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "dispatch", Name: "attempt_duration_seconds",
			Help:    "Time of one delivery attempt (reading the message, the runtime's answer, recording it), by outcome.",
			Buckets: prometheus.DefBuckets,
		}, []string{"outcome"}),
		scheduleCameDue: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "schedule", Name: "came_due_total",
			Help: "Occurrences of schedules that came due, as the drain planned them.",
		}),
		scheduleOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "schedule", Name: "outcomes_total",
			Help: "Outcomes the drain recorded for occurrences of schedules, by outcome (started, refused, not_ready, " +
				"missed) and reason (of a refusal or a not-ready attempt; empty otherwise).",
		}, []string{"outcome", "reason"}),
		scheduleDue: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "schedule", Name: "due",
			Help: "Open occurrences of schedules whose attempt is due now, read after each tick of the drain.",
		}),
		scheduleLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "schedule", Name: "lag_seconds",
			Help: "How long the oldest due work of the drain (an occurrence to start, a schedule to plan) has waited, " +
				"by the database clock; 0 when none waits.",
		}),
		scheduleTick: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "schedule", Name: "tick_duration_seconds",
			Help:    "Time of one tick of the drain: its plan, its take and the starts of what it took.",
			Buckets: prometheus.DefBuckets,
		}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpRequests, m.httpDuration,
		m.claims, m.reclaims, m.fencesLost,
		m.webhookDrops, m.auditFailures,
		m.inboxPending, m.inboxLag, m.inboxApplied, m.inboxCopies,
		m.sweptRead, m.sweptDeleted, m.sweepPass,
		m.sweepFull,
		m.admission.wait, m.admission.refused, m.admission.abandoned,
		m.dispatchPending, m.dispatchFailed, m.dispatchOldest, m.dispatchAttempts, m.dispatchDuration,
		m.scheduleCameDue, m.scheduleOutcomes, m.scheduleDue, m.scheduleLag, m.scheduleTick,
	)
	return m
}

// WatchPool adds the gauges and counters of pool's statistics to the
// metrics, read at every scrape. It returns an error when a pool is
// watched already: the series have no label to tell two pools apart.
func (m *Metrics) WatchPool(pool *pgxpool.Pool) error {
	return m.reg.Register(newPoolCollector(pool))
}

// Handler serves the metrics in the Prometheus text format (or OpenMetrics
// when the scraper asks for it). A collector that fails is left out of the
// page rather than failing the scrape.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg, // counts the scrapes that failed
	})
}

// ObserveRequest records one answered HTTP request. route must be a route
// pattern or "unmatched", and method one of a bounded set, never the raw
// request line: every distinct value is a series kept for the life of the
// process.
func (m *Metrics) ObserveRequest(route, method string, status int, d time.Duration) {
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

// ObserveClaim implements idempotency.Observer: it counts the outcome, and
// the reclaim when the claim took over a passed lease.
func (m *Metrics) ObserveClaim(scope string, kind idempotency.Kind, reclaimed bool) {
	m.claims.WithLabelValues(scope, kind.String()).Inc()
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

// ObserveApplied implements providerjobs.InboxObserver.
func (m *Metrics) ObserveApplied(provider, by string) {
	m.inboxApplied.WithLabelValues(provider, by).Inc()
}

// ObserveCopy implements providerjobs.InboxObserver.
func (m *Metrics) ObserveCopy(provider, reason string) {
	m.inboxCopies.WithLabelValues(provider, reason).Inc()
}

// ObserveAuditFailure implements providerjobs.InboxObserver.
func (m *Metrics) ObserveAuditFailure(provider, reason string) {
	m.auditFailures.WithLabelValues(provider, reason).Inc()
}

// ObserveInbox implements providerjobs.InboxObserver.
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

// ObserveDispatchAttempt implements dispatch.Observer: one ended delivery
// attempt. No organization label: every distinct one would be a series
// kept for the life of the process.
func (m *Metrics) ObserveDispatchAttempt(outcome string, d time.Duration) {
	m.dispatchAttempts.WithLabelValues(outcome).Inc()
	m.dispatchDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

// ObserveDispatchBacklog implements dispatch.Observer.
func (m *Metrics) ObserveDispatchBacklog(pending, failed int64, oldest time.Duration) {
	m.dispatchPending.Set(float64(pending))
	m.dispatchFailed.Set(float64(failed))
	m.dispatchOldest.Set(oldest.Seconds())
}

// ObserveCameDue implements schedule.Observer.
func (m *Metrics) ObserveCameDue(n int) { m.scheduleCameDue.Add(float64(n)) }

// ObserveOutcome implements schedule.Observer. outcome and reason are of
// bounded sets (schedule's statuses and reasons); no label names an
// organization, since every distinct one would be a series kept for the
// life of the process.
func (m *Metrics) ObserveOutcome(outcome, reason string) {
	m.scheduleOutcomes.WithLabelValues(outcome, reason).Inc()
}

// ObserveDrain implements schedule.Observer.
func (m *Metrics) ObserveDrain(due int64, lag, tick time.Duration) {
	m.scheduleDue.Set(float64(due))
	m.scheduleLag.Set(lag.Seconds())
	m.scheduleTick.Observe(tick.Seconds())
}
