package webhooks

import (
	"context"
	"time"
)

// SetClock stubs the waits of w's Run with c (see loop.Loop.Clock).
func SetClock(w *Worker, c func(context.Context, time.Duration) bool) { w.clock = c }
