package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/searchd/searchd/internal/fairq"
)

// admissionMetrics are the admission queue's (package fairq): the waits
// and refusals as they happen, the seats and queues read at each scrape.
// No series is labelled by organization, operator or provider: each would
// be a series kept for the life of the process. The kind of flow
// (organization, operator, provider) is a label.
type admissionMetrics struct {
	wait      *prometheus.HistogramVec
	refused   *prometheus.CounterVec
	abandoned *prometheus.CounterVec
	// waitBy and the others are the series of each kind, looked up once:
	// a request observes without a map lookup.
	waitBy      [4]prometheus.Observer
	fullBy      [4]prometheus.Counter
	timeoutBy   [4]prometheus.Counter
	abandonedBy [4]prometheus.Counter
}

func newAdmissionMetrics(f factory) *admissionMetrics {
	m := &admissionMetrics{
		wait: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "admission", Name: "wait_seconds",
			Help:    "Time requests waited for a seat before they were served (0 when one was free), by kind of flow (organization, operator, provider).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"kind"}),
		refused: f.counterVec("admission", "refused_total",
			"Requests refused 429 rate_limited, by kind of flow and reason (queue_full: the flow's queue was full; wait_timeout: no seat within the longest wait).",
			"kind", "reason"),
		abandoned: f.counterVec("admission", "abandoned_total",
			"Requests whose client went away while they waited for a seat, by kind of flow.", "kind"),
	}
	for _, k := range fairq.Kinds() {
		m.waitBy[k] = m.wait.WithLabelValues(k.String())
		m.fullBy[k] = m.refused.WithLabelValues(k.String(), fairq.QueueFull.String())
		m.timeoutBy[k] = m.refused.WithLabelValues(k.String(), fairq.WaitTimeout.String())
		m.abandonedBy[k] = m.abandoned.WithLabelValues(k.String())
	}
	return m
}

// ObserveAdmission implements fairq.Observer.
func (m *Metrics) ObserveAdmission(kind fairq.Kind, outcome fairq.Outcome, waited time.Duration) {
	a := m.admission
	if int(kind) >= len(a.waitBy) || a.waitBy[kind] == nil {
		return
	}
	switch outcome {
	case fairq.Seated:
		a.waitBy[kind].Observe(waited.Seconds())
	case fairq.QueueFull:
		a.fullBy[kind].Inc()
	case fairq.WaitTimeout:
		a.timeoutBy[kind].Inc()
	case fairq.Gone:
		a.abandonedBy[kind].Inc()
	}
}

// WatchAdmission adds the gauges of q (seats, seats in use, requests and
// flows waiting) to the metrics, read at every scrape. It returns an
// error when a queue is watched already: one process has one.
func (m *Metrics) WatchAdmission(q *fairq.Queue) error {
	gauge := func(name, help string, value func(fairq.Stats) float64) statMetric[fairq.Stats] {
		return newStatMetric("admission", name, help, prometheus.GaugeValue, value)
	}
	return m.reg.Register(&statCollector[fairq.Stats]{stat: func() fairq.Stats { return q.Stats(0) }, metrics: []statMetric[fairq.Stats]{
		gauge("seats", "Requests the process serves at once (SEARCHD_ADMISSION_SEATS).",
			func(s fairq.Stats) float64 { return float64(s.Seats) }),
		gauge("seats_in_use", "Seats taken by requests being served now.",
			func(s fairq.Stats) float64 { return float64(s.InUse) }),
		gauge("queued_requests", "Requests waiting for a seat now, of every flow.",
			func(s fairq.Stats) float64 { return float64(s.Queued) }),
		gauge("waiting_flows", "Flows (organizations, operators, providers) with requests waiting for a seat now.",
			func(s fairq.Stats) float64 { return float64(s.Waiting) }),
		gauge("mean_hold_seconds", "Moving average of how long a request holds its seat: what Retry-After is estimated from.",
			func(s fairq.Stats) float64 { return s.MeanHold.Seconds() }),
	}})
}
