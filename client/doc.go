// Package client is the Go client of the searchd HTTP API: saved searches,
// their snapshots, Run starts and reads, the registration and reads of
// provider jobs, and a runtime's side of a Run (verifying its dispatch,
// reporting its status), with typed requests, answers and errors, and retries that
// never start a Run or register a job twice. The provider callbacks are
// not calls of this client: the provider makes them, signed with its own
// secret.
//
// searchd admits each start exactly once per Idempotency-Key, so the
// client's part of "exactly once" is to send every repeat of one logical
// start with the same key. [Client.StartSavedSearch] and [Client.StartRun]
// mint one key (a random UUID) per call and reuse it on every retry of that
// call. An application that must survive its own restart mints the key
// first with [NewIdempotencyKey], persists it, and passes it with
// [WithIdempotencyKey]; a repeat after the restart then replays the Run the
// first attempt admitted, for as long as the server retains it (396 days).
//
// # Retries
//
// Each call makes up to [RetryPolicy.MaxAttempts] attempts. Whether a
// failed attempt is repeated depends on what the failure proves and on the
// request:
//
//   - Safe requests are the reads (GET), and the starts and creates
//     ([Client.CreateSavedSearch], [Client.RegisterProviderJob]), which
//     always carry an Idempotency-Key (minted per call, or given with
//     [WithIdempotencyKey]), so a repeat replays rather than starts or
//     creates again. They are
//     retried after a connection error (refused, reset, closed before the
//     answer, an attempt that ran out of [RetryPolicy.AttemptTimeout]),
//     409 in_progress (another attempt with the key is still being
//     prepared), 429, 502, 503 and 504.
//   - Writes without a key (update and archive a saved search, replace its
//     baseline) are retried only when the request provably never
//     reached the server: the connection could not be made (dial errors,
//     such as connection refused). A reset, a timeout or a 503 after the
//     request was sent leaves open whether the server applied it, and
//     repeating it could apply it twice (a second archive even answers 404),
//     so the error is returned and the caller decides.
//   - Every other answer is final and returned at once: 400, 401, 404, 405,
//     409 other than in_progress, 413, 415, 422 and 500.
//
// net/http may itself resend a request on a kept-alive connection that
// turns out closed; it does so for the reads and, because they carry an
// Idempotency-Key, for the starts, which is as safe as the retries above.
//
// The wait before a retry is capped exponential backoff with full jitter: a
// random duration between zero and BaseDelay·2ⁿ⁻¹ (at most MaxDelay) before
// the nth retry. A Retry-After header (seconds or an HTTP date) wins when it
// asks for longer, up to MaxRetryAfter. A call never waits past its
// context's deadline: when the next wait would end after it, the call
// returns the last attempt's error at once.
//
// A start also sends Prefer: wait=N ([RetryPolicy.PreferWait], 10 s by
// default): when it meets another request with its key still being
// prepared (a double submit), the server answers it the moment that
// preparation ends, in the same request, rather than with a 409 to retry.
//
// # Lists
//
// [Client.SavedSearches] and [Client.Runs] are Go 1.23 iterators over every
// item of a list, fetching a page at a time as the loop goes on.
//
// # The runtime's side
//
// searchd hands every admitted Run to the runtime as a signed Standard
// Webhooks message whose webhook-id is the Run id (docs/runtime.md). A
// runtime verifies each with [NewDispatchVerifier] (or [VerifyDispatch]),
// deduplicates by the Run id, answers 2xx once the Run is safely its own,
// and reports its status with [Client.ReportRunStatus] on a client that
// carries a runtime credential (`searchd token --runtime`). A report is a
// value to set, retried like a read; [ErrRunFinished] is final.
//
// # Errors
//
// An answer other than 2xx is an [*APIError] carrying the problem document
// the server sent (status, machine code, detail, field errors, request id,
// Retry-After). errors.Is matches it against the sentinels of this package
// by code: errors.Is(err, client.ErrKeyReused). A connection error wraps
// the error of the transport, and a call whose context ended wraps the
// context's error and the last attempt's.
package client
