package dispatch

import (
	"context"
	"time"
)

// SetClock stubs the waits of d's Run with c (see loop.Loop.Clock).
func SetClock(d *Dispatcher, c func(context.Context, time.Duration) bool) { d.clock = c }
