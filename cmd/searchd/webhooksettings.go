package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/searchd/searchd/webhooks"
)

// Environment variables of the delivery of Run events to webhook
// endpoints (docs/webhooks.md).
const (
	envWebhookTimeout           = "SEARCHD_WEBHOOK_TIMEOUT"
	envWebhookConcurrency       = "SEARCHD_WEBHOOK_CONCURRENCY"
	envWebhookMaxBackoff        = "SEARCHD_WEBHOOK_MAX_BACKOFF"
	envWebhookDisableAfter      = "SEARCHD_WEBHOOK_DISABLE_AFTER"
	envWebhookAllowHTTPLoopback = "SEARCHD_WEBHOOK_ALLOW_HTTP_LOOPBACK"
)

// webhookConfig is what serve reads of the webhook settings.
type webhookConfig struct {
	Worker webhooks.WorkerConfig
	// AllowHTTPLoopback accepts http:// endpoints on a loopback host.
	AllowHTTPLoopback bool
}

// webhookWorker returns the run of the worker that delivers Run events to
// every organization's endpoints: every serve runs one, and they share
// the deliveries. It returns once the deliveries in flight (each bounded
// by its lease) have ended.
func (s server) webhookWorker() (func(context.Context), error) {
	cfg := s.cfg.Webhooks.Worker
	cfg.Logger, cfg.UserAgent = s.logger, "searchd/"+buildInfo().Version
	w, err := webhooks.NewWorker(s.st.webhooks, cfg)
	if err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	s.logger.Info("delivering Run events to webhook endpoints", slog.Duration("timeout", cfg.Timeout),
		slog.Duration("disable_after", cfg.DisableAfter), slog.Int("concurrency", cfg.Concurrency))
	return func(ctx context.Context) { _ = w.Run(ctx) }, nil
}

func webhooksValid(c *loading) error { return c.Webhooks.Worker.Validate() }

// webhookSpecs are the settings of the webhook worker.
var webhookSpecs = []spec{
	{env: envWebhookTimeout, flag: "webhook-timeout", in: cmdServers,
		kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Webhooks.Worker.Timeout }, valid: webhooksValid,
			like: "10s or 30s"},
		meaning: "how long one delivery waits for the endpoint's answer; no answer in time is a failed attempt, retried"},
	{env: envWebhookConcurrency, flag: "webhook-concurrency", in: cmdServers,
		kind:    field[int]{at: func(c *loading) *int { return &c.Webhooks.Worker.Concurrency }, valid: webhooksValid},
		meaning: "most webhook deliveries in flight in this process"},
	{env: envWebhookMaxBackoff, flag: "webhook-max-backoff", in: cmdServers,
		kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Webhooks.Worker.MaxBackoff }, valid: webhooksValid,
			like: "10m or 1h"},
		meaning: "the longest wait before a failed delivery is tried again; the wait is " + webhooks.DefaultMinBackoff.String() +
			" after the first failed attempt and doubles, drawn between half and all of it; an endpoint's `Retry-After` is " +
			"honoured up to this"},
	{env: envWebhookDisableAfter, flag: "webhook-disable-after", in: cmdServers,
		kind: field[time.Duration]{at: func(c *loading) *time.Duration { return &c.Webhooks.Worker.DisableAfter }, valid: webhooksValid,
			like: "72h or 24h"},
		meaning: "how long an endpoint may fail every attempt before it is disabled (with the reason); its deliveries then " +
			"wait until someone enables it again"},
	{env: envWebhookAllowHTTPLoopback, flag: "webhook-allow-http-loopback", in: cmdServers,
		kind: boolean{at: func(c *loading) *bool { return &c.Webhooks.AllowHTTPLoopback }},
		meaning: "whether a webhook endpoint may be `http://` to a loopback host (localhost, 127.0.0.1, ::1), for development; " +
			"otherwise every endpoint is https (`searchd dev` turns it on)"},
}
