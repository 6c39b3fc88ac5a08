package api

// CallbackBodiesHeld returns the bytes the budget of callback bodies
// awaiting their signature has given out (tests).
func CallbackBodiesHeld(s *Server) int64 {
	s.callbackBodies.mu.Lock()
	defer s.callbackBodies.mu.Unlock()
	return s.callbackBodies.used
}
