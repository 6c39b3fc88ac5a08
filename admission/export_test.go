package admission

import "context"

// withHooks sets the test hooks of s and returns it: before runs just
// before the preparation's transaction (its error fails the freeze),
// after once a start froze and admitted its Run. Either may be nil.
func withHooks(s *Starter, before func(context.Context) error, after func(context.Context)) *Starter {
	s.hooks = testHooks{beforeFreeze: before, afterFreeze: after}
	return s
}
