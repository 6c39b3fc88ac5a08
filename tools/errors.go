package tools

import "errors"

// ErrInvalid is wrapped by every error about a spec, call, key or
// resolution refused before anything is read or written.
var ErrInvalid = errors.New("tools: invalid call")
