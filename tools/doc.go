// Package tools reads the agent's tool-call journal as the server sees it:
// the answers stored, the uncertain calls a person must decide about
// ([Inspector]), and that decision ([Resolver]).
//
// The journal is agent.idempotency_keys: every effectful tool call of a
// Run is one claim in scope "tool.<name>" whose answer is a [Result] in the
// form [EncodeAnswer] writes. The agent runtime writes it through the
// module github.com/searchd/searchd/toolrun (toolrun/README.md).
package tools
