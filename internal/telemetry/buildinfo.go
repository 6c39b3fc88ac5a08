package telemetry

import "github.com/prometheus/client_golang/prometheus"

// SetBuildInfo registers searchd_build_info, a constant 1 labelled with
// the version, commit and Go version. It returns an error when called twice.
func (m *Metrics) SetBuildInfo(version, commit, goVersion string) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "1, labelled with the version, the commit and the Go version searchd was built from.",
	}, []string{"version", "commit", "goversion"})
	if err := m.reg.Register(g); err != nil {
		return err
	}
	g.WithLabelValues(version, commit, goVersion).Set(1)
	return nil
}
