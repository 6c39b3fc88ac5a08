package main

import (
	"context"
	"log/slog"
)

// applier returns the run of the background applier of the provider
// inbox: nil when its Interval is zero. It applies the deliveries a
// replica stored and did not finish (see providerjobs), with the stores'
// provider jobs service, the one the callback handler lands deliveries
// with.
func (s server) applier() (func(context.Context), error) {
	if s.cfg.Inbox.Applier.Interval <= 0 {
		return nil, nil
	}
	acfg := s.cfg.Inbox.Applier
	acfg.Wake = s.st.wake
	return func(ctx context.Context) {
		if err := s.st.providerJobs.RunApplier(ctx, acfg); err != nil {
			s.logger.Error("the applier did not start", slog.String("error", err.Error()))
		}
	}, nil
}
