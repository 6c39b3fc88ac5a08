package telemetry

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// statCollector exports one snapshot of S per scrape, so a scrape's
// series agree.
type statCollector[S any] struct {
	stat    func() S
	metrics []statMetric[S]
}

// statMetric is one series of a statistics snapshot.
type statMetric[S any] struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(S) float64
}

func newStatMetric[S any](subsystem, name, help string, kind prometheus.ValueType, value func(S) float64) statMetric[S] {
	return statMetric[S]{
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, name), help, nil, nil), kind: kind, value: value,
	}
}

// Describe implements prometheus.Collector.
func (c *statCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector.
func (c *statCollector[S]) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(s))
	}
}

// newPoolCollector exports pgxpool's statistics: cumulative counts as
// counters, current values as gauges.
func newPoolCollector(pool *pgxpool.Pool) *statCollector[*pgxpool.Stat] {
	metric := func(name, help string, kind prometheus.ValueType, value func(*pgxpool.Stat) float64) statMetric[*pgxpool.Stat] {
		return newStatMetric("db_pool", name, help, kind, value)
	}
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	return &statCollector[*pgxpool.Stat]{stat: pool.Stat, metrics: []statMetric[*pgxpool.Stat]{
		metric("total_conns", "Connections open now: idle, acquired and being opened.", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) }),
		metric("idle_conns", "Connections open and idle now.", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) }),
		metric("acquired_conns", "Connections in use now.", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) }),
		metric("constructing_conns", "Connections being opened now.", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.ConstructingConns()) }),
		metric("max_conns", "The most connections the pool opens (pool_max_conns).", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) }),
		metric("acquires_total", "Connections acquired from the pool.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) }),
		metric("acquire_duration_seconds_total", "Time spent acquiring connections, successful acquires only.", counter,
			func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() }),
		metric("empty_acquires_total", "Acquires that found no idle connection and had to wait for one.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) }),
		metric("empty_acquire_wait_seconds_total", "Time acquires spent waiting for a connection when none was idle.", counter,
			func(s *pgxpool.Stat) float64 { return s.EmptyAcquireWaitTime().Seconds() }),
		metric("canceled_acquires_total", "Acquires canceled by their context.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.CanceledAcquireCount()) }),
		metric("new_conns_total", "Connections opened.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.NewConnsCount()) }),
		metric("max_lifetime_destroys_total", "Connections closed for passing pool_max_conn_lifetime.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.MaxLifetimeDestroyCount()) }),
		metric("max_idle_destroys_total", "Connections closed for passing pool_max_conn_idle_time.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.MaxIdleDestroyCount()) }),
	}}
}
