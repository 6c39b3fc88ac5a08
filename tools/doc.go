// Package tools reads and resolves the agent's tool calls as the server sees
// them: the answers the tool-call journal stores, the uncertain calls a
// person must decide about ([Inspector]), and that decision ([Resolver]).
//
// The journal is the idempotency plane's agent.idempotency_keys: every
// effectful tool call of a Run is one claim in scope "tool.<name>", and its
// answer is a [Result] stored in the form [EncodeAnswer] writes. The agent
// runtime, another process, writes it through the Runner of the module
// github.com/searchd/searchd/toolrun (toolrun/README.md); the server only
// reads it and records a person's resolution of an uncertain call:
// delivered (the answer becomes a success naming them) or one retry with
// the same key.
package tools
