// The TypeScript client of searchd, for the product UI (a browser) and
// for Node. Its types are generated from api/openapi.json with
// openapi-typescript (src/schema.d.ts, `npm run generate`); this file is
// the small hand-written layer that carries the retry rules:
//
//   - one Idempotency-Key per logical action (a start, a create), minted
//     once and reused on every retry of that action, so however often it
//     is sent, the server makes one effect;
//   - a start sends Prefer: wait=N, so a double submit is answered the
//     moment the first preparation ends, in the same request;
//   - a 409 in_progress, 429, 502, 503 and 504 and a network failure are
//     retried, after Retry-After when the server sends it (capped), else
//     after a capped exponential backoff with full jitter;
//   - every other 4xx is final and never retried, and a write without a
//     key (PATCH, PUT, DELETE) is never retried at all: a browser cannot
//     tell a request that never left from one whose answer was lost.
//
// It uses nothing but fetch() (and Web Crypto for verifyDispatch, the
// runtime's check of a dispatch), so it runs unchanged in a browser page
// and in Node 18+.

import type { components } from "./schema.js";

export type SavedSearch = components["schemas"]["SavedSearch"];
export type SavedSearchCreate = components["schemas"]["SavedSearchCreate"];
export type SavedSearchUpdate = components["schemas"]["SavedSearchUpdate"];
export type SavedSearchMergePatch = components["schemas"]["SavedSearchMergePatch"];
export type Baseline = components["schemas"]["BaselineInput"];
/** The start options; omitted members take their defaults (max_results 100). */
export type StartOptions = Partial<components["schemas"]["StartOptions"]>;
export type DirectStart = components["schemas"]["DirectStart"];
export type StartResult = components["schemas"]["StartResult"];
export type Run = components["schemas"]["Run"];
/** A Run as getRun reads it: with its dispatch to the runtime. */
export type RunDetail = components["schemas"]["RunDetail"];
/** One event of a Run (GET /v1/runs/{id}/events; the Run webhooks' body too). */
export type RunEvent = components["schemas"]["RunEvent"];
export type Dispatch = components["schemas"]["Dispatch"];
/** A runtime's report of a Run's status (reportRunStatus). */
export type StatusReport = components["schemas"]["StatusReport"];
/** The body of a dispatch: what searchd POSTs to the runtime for every admitted Run (verifyDispatch). */
export type RunDispatch = components["schemas"]["RunDispatch"];
/** The body of a cancel request: searchd asks the runtime to stop a Run (verifyCancel). */
export type RunCancelRequest = components["schemas"]["RunCancelRequest"];
export type RunPage = components["schemas"]["RunPage"];
export type SavedSearchPage = components["schemas"]["SavedSearchPage"];
export type SavedSearchSummary = components["schemas"]["SavedSearchSummary"];
export type Snapshot = components["schemas"]["Snapshot"];
export type ProviderJob = components["schemas"]["ProviderJob"];
export type ProviderJobCreate = components["schemas"]["ProviderJobCreate"];
export type ProviderJobDrop = components["schemas"]["ProviderJobDrop"];
export type Schedule = components["schemas"]["Schedule"];
export type ScheduleSet = components["schemas"]["ScheduleSet"];
export type Occurrence = components["schemas"]["Occurrence"];
export type OccurrencePage = components["schemas"]["OccurrencePage"];
export type Problem = components["schemas"]["Problem"];
export type ProblemCode = Problem["code"];

/** How often and how long calls retry. Every field is optional. */
export interface RetryPolicy {
  /** Most attempts of one call, the first included. Default 8. */
  maxAttempts?: number;
  /** Backoff ceiling before the first retry, doubling up to maxDelayMs. Default 100. */
  baseDelayMs?: number;
  /** Cap of the backoff ceiling. Default 5000. */
  maxDelayMs?: number;
  /** Cap of a Retry-After wait. Default 30000. */
  maxRetryAfterMs?: number;
  /** The Prefer: wait=N of every start, whole seconds 1 to 30; 0 sends none. Default 10. */
  preferWaitSeconds?: number;
}

export interface ClientOptions {
  /** The searchd base URL, such as "http://127.0.0.1:8080". */
  baseUrl: string;
  /** The bearer token, or a function returning the token of each attempt. */
  token: string | (() => string | Promise<string>);
  retry?: RetryPolicy;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: typeof fetch;
  /** How to wait before a retry; tests replace it. Default setTimeout. */
  sleep?: (ms: number) => Promise<void>;
  /** Draws the jitter of a backoff, in [0, 1). Default Math.random. */
  random?: () => number;
}

/** An answer other than 2xx, or a call whose attempts ran out. */
export class SearchdError extends Error {
  /** HTTP status; 0 for a network failure. */
  readonly status: number;
  /** The problem's machine code, such as "not_found"; undefined when the body was none. */
  readonly code?: ProblemCode;
  /** The problem document, when the server sent one. */
  readonly problem?: Problem;
  /** The request id (X-Request-Id), to find the request in the server log. */
  readonly requestId?: string;
  /** The Retry-After the answer asked for, in milliseconds. */
  readonly retryAfterMs?: number;
  /** How many attempts the call made. */
  attempts = 1;

  constructor(status: number, message: string, init: { problem?: Problem; requestId?: string; retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, { cause: init.cause });
    this.name = "SearchdError";
    this.status = status;
    this.problem = init.problem;
    this.code = init.problem?.code;
    this.requestId = init.problem?.request_id ?? init.requestId;
    this.retryAfterMs = init.retryAfterMs;
  }
}

/** A fresh Idempotency-Key: a random UUID. Mint one per user action. */
export function newIdempotencyKey(): string {
  return crypto.randomUUID();
}

/**
 * The Idempotency-Key header value that names key. searchd reads a value
 * that starts with a double quote as a structured-field string (RFC 8941),
 * and refuses a bare value with a comma as a list, so such keys are sent as
 * a string, escaped; any other key is sent as it is.
 */
export function keyHeader(key: string): string {
  if (!key.startsWith('"') && !key.includes(",")) return key;
  return `"${key.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

/** The options of a call that carries an Idempotency-Key. */
export interface KeyOptions {
  /** The key of the action; a fresh one when omitted. Persist it to survive a reload. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** What a start answered, with what the headers said. */
export interface Started extends StartResult {
  /** True for the request that made the start (201). */
  created: boolean;
  /** True when the answer replays an earlier request's start (Idempotent-Replayed). */
  replayed: boolean;
  /** The key the start was sent with, on every attempt. */
  idempotencyKey: string;
  attempts: number;
}

/** A schedule with its ETag, for a later If-Match. */
export interface VersionedSchedule {
  schedule: Schedule;
  etag: string;
  /** True for the set that created the schedule (201). */
  created: boolean;
  /** True when a keyed set replays an earlier request's (Idempotent-Replayed). */
  replayed: boolean;
}

/** A saved search with its ETag, for a later If-Match. */
export interface Versioned {
  savedSearch: SavedSearch;
  etag: string;
  replayed: boolean;
}

type Safety = "repeatable" | "once";

interface Call {
  method: string;
  path: string;
  body?: unknown;
  contentType?: string;
  key?: string;
  headers?: Record<string, string>;
  safety: Safety;
  signal?: AbortSignal;
}

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
  attempts: number;
}

const retriedStatuses = new Set([429, 502, 503, 504]);

/** A client of one searchd. */
export class SearchdClient {
  private readonly base: string;
  private readonly token: () => string | Promise<string>;
  private readonly retry: Required<RetryPolicy>;
  private readonly fetch: typeof fetch;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;

  constructor(opts: ClientOptions) {
    this.base = opts.baseUrl.replace(/\/+$/, "");
    const token = opts.token;
    this.token = typeof token === "string" ? () => token : token;
    const r = opts.retry ?? {};
    this.retry = {
      maxAttempts: r.maxAttempts ?? 8,
      baseDelayMs: r.baseDelayMs ?? 100,
      maxDelayMs: r.maxDelayMs ?? 5000,
      maxRetryAfterMs: r.maxRetryAfterMs ?? 30000,
      preferWaitSeconds: r.preferWaitSeconds ?? 10,
    };
    if (!Number.isInteger(this.retry.preferWaitSeconds) || this.retry.preferWaitSeconds < 0 || this.retry.preferWaitSeconds > 30) {
      throw new RangeError("retry.preferWaitSeconds must be a whole number of seconds from 0 to 30");
    }
    if (this.retry.maxAttempts < 1) throw new RangeError("retry.maxAttempts must be at least 1");
    this.fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.sleep = opts.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = opts.random ?? Math.random;
  }

  /** Starts a Run on a frozen snapshot of saved search id, or replays the one its key started. */
  async startSavedSearch(id: string, options: StartOptions = {}, o: KeyOptions = {}): Promise<Started> {
    return this.start(`/v1/saved-searches/${encodeURIComponent(id)}/start`, options, o);
  }

  /** Starts a capability or definition Run, or replays the one its key started. */
  async startRun(d: DirectStart, o: KeyOptions = {}): Promise<Started> {
    return this.start("/v1/runs", d, o);
  }

  private async start(path: string, body: unknown, o: KeyOptions): Promise<Started> {
    const key = o.idempotencyKey ?? newIdempotencyKey();
    const headers: Record<string, string> = {};
    if (this.retry.preferWaitSeconds > 0) headers["Prefer"] = `wait=${this.retry.preferWaitSeconds}`;
    const a = await this.call({ method: "POST", path, body, key, headers, safety: "repeatable", signal: o.signal });
    const res = a.body as StartResult;
    return { ...res, created: a.status === 201, replayed: a.headers.get("Idempotent-Replayed") === "true", idempotencyKey: key, attempts: a.attempts };
  }

  /** Creates a saved search, once per key (a repeat answers the one the key created). */
  async createSavedSearch(body: SavedSearchCreate, o: KeyOptions = {}): Promise<Versioned> {
    const key = o.idempotencyKey ?? newIdempotencyKey();
    const a = await this.call({ method: "POST", path: "/v1/saved-searches", body, key, safety: "repeatable", signal: o.signal });
    return versioned(a);
  }

  /** Reads a saved search; with archived, an archived one too. */
  async getSavedSearch(id: string, o: { archived?: boolean; signal?: AbortSignal } = {}): Promise<Versioned> {
    const q = o.archived ? "?archived=true" : "";
    return versioned(await this.call({ method: "GET", path: `/v1/saved-searches/${encodeURIComponent(id)}${q}`, safety: "repeatable", signal: o.signal }));
  }

  /**
   * Changes the name and/or brief. With merge, the body is an RFC 7396 merge
   * patch (a filter set to null is removed); without, each member given
   * replaces its value whole. ifMatch (an ETag) makes it conditional: a
   * change to another version fails with code precondition_failed. Never
   * retried: it carries no key.
   */
  async updateSavedSearch(id: string, patch: SavedSearchUpdate | SavedSearchMergePatch, o: { ifMatch?: string; merge?: boolean; signal?: AbortSignal } = {}): Promise<Versioned> {
    const headers: Record<string, string> = {};
    if (o.ifMatch) headers["If-Match"] = o.ifMatch;
    return versioned(await this.call({
      method: "PATCH", path: `/v1/saved-searches/${encodeURIComponent(id)}`, body: patch, headers, safety: "once",
      contentType: o.merge ? "application/merge-patch+json" : "application/json", signal: o.signal,
    }));
  }

  /** Archives a saved search; with ifMatch, only that version. Never retried. */
  async archiveSavedSearch(id: string, o: { ifMatch?: string; signal?: AbortSignal } = {}): Promise<void> {
    const headers: Record<string, string> = {};
    if (o.ifMatch) headers["If-Match"] = o.ifMatch;
    await this.call({ method: "DELETE", path: `/v1/saved-searches/${encodeURIComponent(id)}`, headers, safety: "once", signal: o.signal });
  }

  /** A page of saved searches, newest first. */
  async listSavedSearches(p: { limit?: number; cursor?: string; archived?: boolean; signal?: AbortSignal } = {}): Promise<SavedSearchPage> {
    const q = query({ limit: p.limit, cursor: p.cursor, archived: p.archived ? "true" : undefined });
    return (await this.call({ method: "GET", path: `/v1/saved-searches${q}`, safety: "repeatable", signal: p.signal })).body as SavedSearchPage;
  }

  /** Every saved search, a page at a time as the loop goes on. */
  async *savedSearches(p: { limit?: number; archived?: boolean; signal?: AbortSignal } = {}): AsyncGenerator<SavedSearchSummary> {
    let cursor: string | undefined;
    do {
      const page = await this.listSavedSearches({ ...p, cursor });
      yield* page.items;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** Reads a Run, with its dispatch to the runtime. */
  async getRun(id: string, o: { signal?: AbortSignal } = {}): Promise<RunDetail> {
    return (await this.call({ method: "GET", path: `/v1/runs/${encodeURIComponent(id)}`, safety: "repeatable", signal: o.signal })).body as RunDetail;
  }

  /**
   * Reports a Run's status, for a runtime: the token must be a runtime
   * credential of the Run's organization (searchd token --runtime); a user
   * token fails with code insufficient_scope. A report is a value to set, so
   * it is retried like a read: the same report twice changes the Run once.
   * A report that would change a finished Run fails with code run_finished
   * (problem.current_status says how it ended); it is final.
   */
  async reportRunStatus(id: string, report: StatusReport, o: { signal?: AbortSignal } = {}): Promise<Run> {
    return (await this.call({ method: "PUT", path: `/v1/runs/${encodeURIComponent(id)}/status`, body: report, safety: "repeatable", signal: o.signal })).body as Run;
  }

  /**
   * Cancels a Run. A queued Run is cancelled at once and never dispatched; a
   * Run the runtime has keeps its status, with cancel_requested_at set,
   * until the runtime reports it cancelled (one that succeeds or fails first
   * keeps how it finished). Idempotent, so it is retried like a read: a
   * repeat answers the Run as it is. A Run that succeeded or failed fails
   * with code run_finished, which is final. reason: at most 500 characters.
   */
  async cancelRun(id: string, o: { reason?: string; signal?: AbortSignal } = {}): Promise<Run> {
    const body = o.reason === undefined ? {} : { reason: o.reason };
    return (await this.call({ method: "POST", path: `/v1/runs/${encodeURIComponent(id)}/cancel`, body, safety: "repeatable", signal: o.signal })).body as Run;
  }

  /**
   * Follows a Run's events as they happen: GET /v1/runs/{id}/events, a
   * Server-Sent Events stream read with fetch (an EventSource cannot send
   * the bearer token). Yields every event with a seq after lastEventId (0,
   * the default: the admission first), in seq order, once each; ends after
   * the Run's terminal event (run.succeeded, run.failed, run.cancelled).
   * When the stream ends before (the server's longest stream, a restart, a
   * cut connection) it reconnects after the stream's retry: with
   * Last-Event-ID, so nothing is missed or repeated; a refusal that may be
   * retried (429, 503 too_many_streams) is retried as a read, any other
   * (not_found) throws. Stop early with signal, or by leaving the loop.
   */
  async *followRun(id: string, o: { lastEventId?: number; signal?: AbortSignal } = {}): AsyncGenerator<RunEvent> {
    const path = `/v1/runs/${encodeURIComponent(id)}/events`;
    let last = o.lastEventId ?? 0;
    for (let failures = 0; ;) {
      const headers: Record<string, string> = { Accept: "text/event-stream", "Last-Event-ID": String(last) };
      headers["Authorization"] = `Bearer ${await this.token()}`;
      let res: Response;
      try {
        res = await this.fetch(this.base + path, { headers, signal: o.signal });
      } catch (cause) {
        if (o.signal?.aborted) throw cause;
        const err = new SearchdError(0, `searchd: GET ${path}: network failure: ${String(cause)}`, { cause });
        err.attempts = ++failures;
        if (failures >= this.retry.maxAttempts) throw err;
        await this.sleep(this.delay(failures));
        continue;
      }
      if (res.status === 204) return; // the Run finished, and we have its last event
      if (!res.ok || !res.body) {
        const err = problemError("GET", path, res, await res.text());
        err.attempts = ++failures;
        if (!retryable("repeatable", err) || failures >= this.retry.maxAttempts) throw err;
        await this.sleep(this.delay(failures, err.retryAfterMs));
        continue;
      }
      failures = 0;
      let retryMs = 2000;
      for await (const m of serverSentEvents(res.body, (ms) => { retryMs = ms; })) {
        const e = safeJSON(m.data) as RunEvent | undefined;
        if (!e || typeof e.seq !== "number" || e.seq <= last) continue;
        last = e.seq;
        yield e;
        if (e.type === "run.succeeded" || e.type === "run.failed" || e.type === "run.cancelled") return;
      }
      if (o.signal?.aborted) return;
      await this.sleep(retryMs);
    }
  }

  /**
   * A page of Runs, newest first. Each filter set keeps the Runs it matches
   * (savedSearchId, status, idempotencyKey, and createdAfter and
   * createdBefore, RFC 3339 instants, both exclusive); pass the same
   * filters with the cursor of the page before.
   */
  async listRuns(p: {
    savedSearchId?: string; status?: Run["status"]; idempotencyKey?: string; createdAfter?: string; createdBefore?: string;
    limit?: number; cursor?: string; signal?: AbortSignal;
  } = {}): Promise<RunPage> {
    const q = query({
      saved_search_id: p.savedSearchId, status: p.status, idempotency_key: p.idempotencyKey,
      created_after: p.createdAfter, created_before: p.createdBefore, limit: p.limit, cursor: p.cursor,
    });
    return (await this.call({ method: "GET", path: `/v1/runs${q}`, safety: "repeatable", signal: p.signal })).body as RunPage;
  }

  /** Registers a provider job for a Run, once per key. */
  async registerProviderJob(body: ProviderJobCreate, o: KeyOptions = {}): Promise<{ job: ProviderJob; created: boolean; replayed: boolean }> {
    const key = o.idempotencyKey ?? newIdempotencyKey();
    const a = await this.call({ method: "POST", path: "/v1/provider-jobs", body, key, safety: "repeatable", signal: o.signal });
    return { job: a.body as ProviderJob, created: a.status === 201, replayed: a.headers.get("Idempotent-Replayed") === "true" };
  }

  /** The dropped deliveries of a provider job, newest first. */
  async listProviderJobDrops(id: string, o: { signal?: AbortSignal } = {}): Promise<ProviderJobDrop[]> {
    const a = await this.call({ method: "GET", path: `/v1/provider-jobs/${encodeURIComponent(id)}/drops`, safety: "repeatable", signal: o.signal });
    return (a.body as { items: ProviderJobDrop[] }).items;
  }

  /**
   * Sets (creates or replaces) a saved search's schedule, once per key: a
   * repeat answers the schedule as it is now. ifMatch (an ETag) makes it
   * change exactly that version, and refuses to create one.
   */
  async setSchedule(id: string, body: ScheduleSet, o: KeyOptions & { ifMatch?: string } = {}): Promise<VersionedSchedule> {
    const key = o.idempotencyKey ?? newIdempotencyKey();
    const headers: Record<string, string> = {};
    if (o.ifMatch) headers["If-Match"] = o.ifMatch;
    return versionedSchedule(await this.call({ method: "PUT", path: schedulePath(id), body, key, headers, safety: "repeatable", signal: o.signal }));
  }

  /** Reads a saved search's schedule (code not_found when it has none). */
  async getSchedule(id: string, o: { signal?: AbortSignal } = {}): Promise<VersionedSchedule> {
    return versionedSchedule(await this.call({ method: "GET", path: schedulePath(id), safety: "repeatable", signal: o.signal }));
  }

  /**
   * Pauses a schedule: no occurrences until resumed. A set, so retried like
   * a read; with ifMatch, never retried (a repeat would meet the version the
   * pause made).
   */
  async pauseSchedule(id: string, o: { ifMatch?: string; signal?: AbortSignal } = {}): Promise<VersionedSchedule> {
    return this.changeSchedule(id, "pause", o);
  }

  /** Resumes a paused schedule from the next time it comes due; nothing is back-filled. Retried as pauseSchedule. */
  async resumeSchedule(id: string, o: { ifMatch?: string; signal?: AbortSignal } = {}): Promise<VersionedSchedule> {
    return this.changeSchedule(id, "resume", o);
  }

  private async changeSchedule(id: string, verb: string, o: { ifMatch?: string; signal?: AbortSignal }): Promise<VersionedSchedule> {
    const headers: Record<string, string> = {};
    if (o.ifMatch) headers["If-Match"] = o.ifMatch;
    return versionedSchedule(await this.call({
      method: "POST", path: `${schedulePath(id)}/${verb}`, headers, safety: o.ifMatch ? "once" : "repeatable", signal: o.signal,
    }));
  }

  /** Removes a saved search's schedule (its occurrences stay); with ifMatch, only that version. Never retried. */
  async removeSchedule(id: string, o: { ifMatch?: string; signal?: AbortSignal } = {}): Promise<void> {
    const headers: Record<string, string> = {};
    if (o.ifMatch) headers["If-Match"] = o.ifMatch;
    await this.call({ method: "DELETE", path: schedulePath(id), headers, safety: "once", signal: o.signal });
  }

  /** A page of a saved search's occurrences, latest due first. */
  async listOccurrences(id: string, p: { limit?: number; cursor?: string; signal?: AbortSignal } = {}): Promise<OccurrencePage> {
    const q = query({ limit: p.limit, cursor: p.cursor });
    return (await this.call({ method: "GET", path: `/v1/saved-searches/${encodeURIComponent(id)}/occurrences${q}`, safety: "repeatable", signal: p.signal })).body as OccurrencePage;
  }

  /** Every occurrence of a saved search, a page at a time as the loop goes on. */
  async *occurrences(id: string, p: { limit?: number; signal?: AbortSignal } = {}): AsyncGenerator<Occurrence> {
    let cursor: string | undefined;
    do {
      const page = await this.listOccurrences(id, { ...p, cursor });
      yield* page.items;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** Sends c until an attempt succeeds, one fails for good, or the attempts run out. */
  private async call(c: Call): Promise<Answer> {
    for (let n = 1; ; n++) {
      let err: SearchdError;
      try {
        const a = await this.attempt(c);
        return { ...a, attempts: n };
      } catch (e) {
        if (!(e instanceof SearchdError) || c.signal?.aborted) throw e;
        err = e;
      }
      err.attempts = n;
      if (!retryable(c.safety, err) || n >= this.retry.maxAttempts) throw err;
      await this.sleep(this.delay(n, err.retryAfterMs));
    }
  }

  /** The wait before retry n: full jitter under a doubling ceiling, or Retry-After when it asks for longer. */
  private delay(n: number, retryAfterMs?: number): number {
    const ceiling = Math.min(this.retry.maxDelayMs, this.retry.baseDelayMs * 2 ** (n - 1));
    const backoff = Math.floor(this.random() * ceiling);
    return retryAfterMs === undefined ? backoff : Math.max(backoff, Math.min(retryAfterMs, this.retry.maxRetryAfterMs));
  }

  private async attempt(c: Call): Promise<Omit<Answer, "attempts">> {
    const headers: Record<string, string> = { Accept: "application/json, application/problem+json", ...c.headers };
    headers["Authorization"] = `Bearer ${await this.token()}`;
    if (c.key !== undefined) headers["Idempotency-Key"] = keyHeader(c.key);
    let body: string | undefined;
    if (c.body !== undefined) {
      body = JSON.stringify(c.body);
      headers["Content-Type"] = c.contentType ?? "application/json";
    }
    let res: Response;
    try {
      res = await this.fetch(this.base + c.path, { method: c.method, headers, body, signal: c.signal });
    } catch (cause) {
      if (c.signal?.aborted) throw cause;
      throw new SearchdError(0, `searchd: ${c.method} ${c.path}: network failure: ${String(cause)}`, { cause });
    }
    const text = await res.text();
    if (res.ok) return { status: res.status, headers: res.headers, body: text ? safeJSON(text) : undefined };
    throw problemError(c.method, c.path, res, text);
  }
}

/** The error of an answer other than 2xx, whose body is text. */
function problemError(method: string, path: string, res: Response, text: string): SearchdError {
  const parsed = text ? safeJSON(text) : undefined;
  const problem = isProblem(parsed) ? parsed : undefined;
  const retryAfterMs = parseRetryAfter(res.headers.get("Retry-After"));
  const what = problem ? `${problem.code}: ${problem.detail}` : res.statusText;
  return new SearchdError(res.status, `searchd: ${method} ${path}: ${res.status} ${what}`, {
    problem, requestId: res.headers.get("X-Request-Id") ?? undefined, retryAfterMs,
  });
}

/** One message of a Server-Sent Events stream. */
export interface ServerSentEvent {
  /** The event's id (for searchd, its seq); "" when it has none. */
  id: string;
  /** The event type; "message" when the stream named none. */
  event: string;
  /** The data lines, joined by "\n". */
  data: string;
}

/**
 * Parses a text/event-stream body (WHATWG HTML, "Interpreting an event
 * stream"): lines end with CRLF, LF or CR; a blank line dispatches the
 * event; comment lines (":") are skipped; retry: is handed to onRetry. The
 * reader is cancelled when the loop stops early. A small parser rather than
 * a dependency: the client needs nothing but fetch.
 */
export async function* serverSentEvents(body: ReadableStream<Uint8Array>, onRetry: (ms: number) => void = () => {}): AsyncGenerator<ServerSentEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let id = "", event = "", data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buf += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let m: RegExpExecArray | null;
      // A CR at the very end may be the first half of a CRLF: wait for more.
      while ((m = /\r\n|\n|\r(?!$)/.exec(buf)) !== null) {
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === "") {
          if (data.length > 0) yield { id, event: event || "message", data: data.join("\n") };
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? "" : line.slice(colon + 1);
        if (v.startsWith(" ")) v = v.slice(1);
        if (field === "data") data.push(v);
        else if (field === "event") event = v;
        else if (field === "id" && !v.includes("\0")) id = v;
        else if (field === "retry" && /^[0-9]+$/.test(v)) onRetry(Number(v));
      }
      if (done) return; // an event without its blank line is dropped, as the standard says
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** Whether a failed attempt of a request of safety s may be sent again. */
export function retryable(s: Safety, err: SearchdError): boolean {
  if (s !== "repeatable") return false;
  if (err.status === 0) return true; // the network: the key makes a repeat harmless
  if (err.status === 409) return err.code === "in_progress";
  return retriedStatuses.has(err.status);
}

/** Reads Retry-After: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function versioned(a: Answer): Versioned {
  return { savedSearch: a.body as SavedSearch, etag: a.headers.get("ETag") ?? "", replayed: a.headers.get("Idempotent-Replayed") === "true" };
}

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}

function safeJSON(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isProblem(v: unknown): v is Problem {
  return typeof v === "object" && v !== null && typeof (v as { code?: unknown }).code === "string";
}

/** A dispatch that does not verify: refuse it with a 4xx. */
export class DispatchVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DispatchVerificationError";
  }
}

/** The options of verifyDispatch. */
export interface VerifyOptions {
  /** The clock, in milliseconds since the epoch. Default Date.now(). */
  now?: number;
  /** How far webhook-timestamp may be from now, in seconds. Default 300 (Standard Webhooks). */
  toleranceSeconds?: number;
}

/**
 * Verifies a dispatch as a runtime receives it and returns its body: the
 * Standard Webhooks signature (HMAC-SHA256 of "id.timestamp.body" under the
 * secret, "whsec_" and base64 as SEARCHD_RUNTIME_SECRET holds it, or the
 * raw key), a timestamp within the tolerance, and a body that is a dispatch
 * of the Run its webhook-id names. Deduplicate by that id: every
 * redelivery of a Run carries the same id and body. body must be the raw
 * text as received. Throws DispatchVerificationError for anything that does
 * not verify. Uses Web Crypto (browsers, Node 18+).
 */
export async function verifyDispatch(secret: string, headers: Headers | Record<string, string>, body: string, o: VerifyOptions = {}): Promise<RunDispatch> {
  const id = await verifySignature(secret, headers, body, o);
  const d = safeJSON(body) as RunDispatch | undefined;
  if (!d || d.type !== "run.admitted" || d.data?.run?.id !== id) throw new DispatchVerificationError("the body is not a dispatch of the Run webhook-id names");
  return d;
}

/**
 * Verifies a cancel request as a runtime receives it and returns its body,
 * as verifyDispatch does a dispatch: its webhook-id is "cancel_" and the
 * Run id, its type run.cancel_requested. Stop the Run (or do not start
 * it), then report it cancelled; deduplicate by the webhook-id. Tell a
 * cancel request from a dispatch by isCancel(headers). Throws
 * DispatchVerificationError for anything that does not verify.
 */
export async function verifyCancel(secret: string, headers: Headers | Record<string, string>, body: string, o: VerifyOptions = {}): Promise<RunCancelRequest> {
  const id = await verifySignature(secret, headers, body, o);
  const c = safeJSON(body) as RunCancelRequest | undefined;
  if (!c || c.type !== "run.cancel_requested" || `cancel_${c.data?.run?.id}` !== id) throw new DispatchVerificationError("the body is not a cancel request of the Run webhook-id names");
  return c;
}

/** Reports whether a message searchd POSTed is a cancel request (verifyCancel) rather than a dispatch (verifyDispatch), by its webhook-id. */
export function isCancel(headers: Headers | Record<string, string>): boolean {
  const h = headers instanceof Headers ? headers : new Headers(headers);
  return (h.get("webhook-id") ?? "").startsWith("cancel_");
}

/** Checks a message's Standard Webhooks signature and timestamp, and returns its webhook-id. */
async function verifySignature(secret: string, headers: Headers | Record<string, string>, body: string, o: VerifyOptions): Promise<string> {
  const h = headers instanceof Headers ? headers : new Headers(headers);
  const id = h.get("webhook-id");
  const ts = h.get("webhook-timestamp");
  const sigs = h.get("webhook-signature");
  if (!id || !ts || !sigs) throw new DispatchVerificationError("missing webhook-id, webhook-timestamp or webhook-signature");
  if (!/^\d+$/.test(ts)) throw new DispatchVerificationError("webhook-timestamp is not unix seconds");
  const now = (o.now ?? Date.now()) / 1000;
  if (Math.abs(now - Number(ts)) > (o.toleranceSeconds ?? 300)) throw new DispatchVerificationError("webhook-timestamp is outside the tolerance");
  const key: Uint8Array<ArrayBuffer> = secret.startsWith("whsec_") ? base64ToBytes(secret.slice("whsec_".length)) : new TextEncoder().encode(secret);
  if (key.length === 0) throw new DispatchVerificationError("the secret is empty");
  const hmacKey = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", hmacKey, new TextEncoder().encode(`${id}.${ts}.${body}`)));
  const expected = bytesToBase64(mac);
  const match = sigs.split(" ").some((s) => {
    const [version, sig] = s.split(",", 2);
    return version === "v1" && sig !== undefined && constantTimeEqual(sig, expected);
  });
  if (!match) throw new DispatchVerificationError("no signature matches");
  return id;
}

function base64ToBytes(b64: string): Uint8Array<ArrayBuffer> {
  try {
    return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  } catch {
    throw new DispatchVerificationError("a whsec_ secret must be followed by standard base64");
  }
}

function bytesToBase64(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s);
}

function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function schedulePath(id: string): string {
  return `/v1/saved-searches/${encodeURIComponent(id)}/schedule`;
}

function versionedSchedule(a: Answer): VersionedSchedule {
  return {
    schedule: a.body as Schedule, etag: a.headers.get("ETag") ?? "",
    created: a.status === 201, replayed: a.headers.get("Idempotent-Replayed") === "true",
  };
}
