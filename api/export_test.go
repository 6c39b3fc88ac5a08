package api

// SetProcessorsSaturated replaces what the server's organization limiter
// takes for processor saturation (tests).
func SetProcessorsSaturated(s *Server, saturated func() bool) { s.orgLimiter.saturated = saturated }

// CallbackBodiesHeld returns the bytes the budget of callback bodies
// awaiting their signature has given out (tests).
func CallbackBodiesHeld(s *Server) int64 {
	s.callbackBodies.mu.Lock()
	defer s.callbackBodies.mu.Unlock()
	return s.callbackBodies.used
}
