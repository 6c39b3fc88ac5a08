package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/searchd/searchd/internal/seatq"
)

// seatMetrics are the seat queue's (package seatq): the waits
// and refusals as they happen, the seats and queues read at each scrape.
// No series is labelled by organization, operator or provider: each would
// be a series kept for the life of the process. The kind of flow
// (organization, operator, provider) is a label.
type seatMetrics struct {
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

func newSeatMetrics(f factory) *seatMetrics {
	m := &seatMetrics{
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
	for _, k := range seatq.Kinds() {
		m.waitBy[k] = m.wait.WithLabelValues(k.String())
		m.fullBy[k] = m.refused.WithLabelValues(k.String(), seatq.QueueFull.String())
		m.timeoutBy[k] = m.refused.WithLabelValues(k.String(), seatq.WaitTimeout.String())
		m.abandonedBy[k] = m.abandoned.WithLabelValues(k.String())
	}
	return m
}

// ObserveSeat implements seatq.Observer.
func (m *Metrics) ObserveSeat(kind seatq.Kind, outcome seatq.Outcome, waited time.Duration) {
	a := m.admission
	if int(kind) >= len(a.waitBy) || a.waitBy[kind] == nil {
		return
	}
	switch outcome {
	case seatq.Seated:
		a.waitBy[kind].Observe(waited.Seconds())
	case seatq.QueueFull:
		a.fullBy[kind].Inc()
	case seatq.WaitTimeout:
		a.timeoutBy[kind].Inc()
	case seatq.Gone:
		a.abandonedBy[kind].Inc()
	}
}

// WatchSeats adds the gauges of q (seats, seats in use, requests and
// flows waiting) to the metrics, read at every scrape. It returns an
// error when a queue is watched already: one process has one.
func (m *Metrics) WatchSeats(q *seatq.Queue) error {
	gauge := func(name, help string, value func(seatq.Stats) float64) statMetric[seatq.Stats] {
		return newStatMetric("admission", name, help, prometheus.GaugeValue, value)
	}
	return m.reg.Register(&statCollector[seatq.Stats]{stat: func() seatq.Stats { return q.Stats(0) }, metrics: []statMetric[seatq.Stats]{
		gauge("seats", "Requests the process serves at once (SEARCHD_SEATS).",
			func(s seatq.Stats) float64 { return float64(s.Seats) }),
		gauge("seats_in_use", "Seats taken by requests being served now.",
			func(s seatq.Stats) float64 { return float64(s.InUse) }),
		gauge("queued_requests", "Requests waiting for a seat now, of every flow.",
			func(s seatq.Stats) float64 { return float64(s.Queued) }),
		gauge("waiting_flows", "Flows (organizations, operators, providers) with requests waiting for a seat now.",
			func(s seatq.Stats) float64 { return float64(s.Waiting) }),
		gauge("mean_hold_seconds", "Moving average of how long a request holds its seat: what Retry-After is estimated from.",
			func(s seatq.Stats) float64 { return s.MeanHold.Seconds() }),
	}})
}
