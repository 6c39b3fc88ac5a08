package api

// SetProcessorsSaturated replaces what the server's organization limiter
// takes for processor saturation (tests).
func SetProcessorsSaturated(s *Server, saturated func() bool) { s.orgLimiter.saturated = saturated }
