// Tests of the retry layer against a scripted fetch: what each attempt
// sent, how long the client waited, and which answers end a call.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SearchdClient, SearchdError, parseRetryAfter } from "../src/index.js";

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

type Step = { status: number; body?: unknown; headers?: Record<string, string> } | "network";

/** A fetch that answers the nth request with the nth step (the last step repeats). */
function scripted(steps: Step[]) {
  const seen: Seen[] = [];
  const fetch = async (url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    seen.push({ method: init?.method ?? "GET", url: String(url), headers: { ...(init?.headers as Record<string, string>) }, body: init?.body as string | undefined });
    const step = steps[Math.min(seen.length - 1, steps.length - 1)]!;
    if (step === "network") throw new TypeError("Failed to fetch");
    const headers = new Headers(step.headers);
    if (step.body !== undefined && !headers.has("Content-Type")) {
      headers.set("Content-Type", step.status >= 400 ? "application/problem+json" : "application/json");
    }
    return new Response(step.body === undefined ? null : JSON.stringify(step.body), { status: step.status, headers });
  };
  return { fetch: fetch as typeof globalThis.fetch, seen };
}

function client(steps: Step[], retry = {}) {
  const s = scripted(steps);
  const waits: number[] = [];
  const c = new SearchdClient({
    baseUrl: "http://searchd.test/", token: "tok", fetch: s.fetch, retry,
    sleep: async (ms) => { waits.push(ms); }, random: () => 0.5,
  });
  return { c, seen: s.seen, waits };
}

const problem = (status: number, code: string) => ({ type: `/problems/${code}`, title: code, status, detail: code, code, request_id: "r-1" });
const started = { run: { id: "run-1" }, snapshot: { id: "snap-1" } };
const ss = { id: "ss-1", version: 3, name: "n", brief: { query: "q" } };

test("a start sends one key on every retry, Prefer: wait, and honours Retry-After", async () => {
  const { c, seen, waits } = client([
    { status: 409, body: problem(409, "in_progress"), headers: { "Retry-After": "1" } },
    "network",
    { status: 503, body: problem(503, "unavailable"), headers: { "Retry-After": "2" } },
    { status: 200, body: started, headers: { "Idempotent-Replayed": "true" } },
  ]);
  const res = await c.startSavedSearch("ss-1", { max_results: 10 });
  assert.equal(seen.length, 4);
  const keys = new Set(seen.map((s) => s.headers["Idempotency-Key"]));
  assert.equal(keys.size, 1, "one key for every attempt");
  assert.equal(res.idempotencyKey, seen[0]!.headers["Idempotency-Key"]);
  assert.match(res.idempotencyKey, /^[0-9a-f-]{36}$/);
  for (const s of seen) {
    assert.equal(s.headers["Prefer"], "wait=10");
    assert.equal(s.headers["Authorization"], "Bearer tok");
    assert.equal(s.url, "http://searchd.test/v1/saved-searches/ss-1/start");
    assert.equal(s.body, '{"max_results":10}');
  }
  assert.deepEqual(waits, [1000, 100, 2000], "Retry-After wins over a shorter backoff");
  assert.equal(res.replayed, true);
  assert.equal(res.created, false);
  assert.equal(res.attempts, 4);
  assert.equal(res.run.id, "run-1");
});

test("a key the caller gives is sent as it is", async () => {
  const { c, seen } = client([{ status: 201, body: started }]);
  const res = await c.startSavedSearch("ss-1", {}, { idempotencyKey: "click-42" });
  assert.equal(seen[0]!.headers["Idempotency-Key"], "click-42");
  assert.equal(res.created, true);
});

test("a key with a comma or a leading quote is sent as a structured-field string", async () => {
  for (const [key, header] of [["a1, a2", '"a1, a2"'], ['"q" \\', '"\\"q\\" \\\\"'], ["plain key", "plain key"]] as const) {
    const { c, seen } = client([{ status: 201, body: started }]);
    const res = await c.startSavedSearch("ss-1", {}, { idempotencyKey: key });
    assert.equal(seen[0]!.headers["Idempotency-Key"], header, `key ${key}`);
    assert.equal(res.idempotencyKey, key);
  }
});

test("a final 4xx is never retried", async () => {
  for (const [status, code] of [[400, "validation_failed"], [401, "unauthorized"], [404, "not_found"], [409, "already_registered"], [412, "precondition_failed"], [422, "key_reused"]] as const) {
    const { c, seen, waits } = client([{ status, body: problem(status, code), headers: { "Retry-After": "1" } }, { status: 201, body: started }]);
    await assert.rejects(c.startSavedSearch("ss-1"), (e: unknown) => {
      assert.ok(e instanceof SearchdError);
      assert.equal(e.status, status);
      assert.equal(e.code, code);
      assert.equal(e.requestId, "r-1");
      return true;
    });
    assert.equal(seen.length, 1, `${status} ${code} was retried`);
    assert.equal(waits.length, 0);
  }
});

test("the attempts run out with the last error", async () => {
  const { c, seen } = client([{ status: 503, body: problem(503, "unavailable") }], { maxAttempts: 3 });
  await assert.rejects(c.getRun("run-1"), (e: unknown) => e instanceof SearchdError && e.status === 503 && e.attempts === 3);
  assert.equal(seen.length, 3);
});

test("backoff doubles under its cap, with full jitter", async () => {
  const { c, waits } = client([{ status: 502 }, { status: 502 }, { status: 502 }, { status: 502 }, { status: 200, body: {} }],
    { baseDelayMs: 100, maxDelayMs: 300 });
  await c.getRun("run-1");
  assert.deepEqual(waits, [50, 100, 150, 150]);
});

test("a write without a key is never retried, even after a network failure", async () => {
  for (const first of ["network", { status: 503, body: problem(503, "unavailable") }] as Step[]) {
    const { c, seen } = client([first, { status: 200, body: ss, headers: { ETag: '"4"' } }]);
    await assert.rejects(c.updateSavedSearch("ss-1", { name: "x" }), SearchdError);
    assert.equal(seen.length, 1);
  }
});

test("a create carries a key and is retried with it; the ETag comes back", async () => {
  const { c, seen } = client(["network", { status: 200, body: ss, headers: { ETag: '"3"', "Idempotent-Replayed": "true" } }]);
  const res = await c.createSavedSearch({ name: "n", brief: { query: "q" } });
  assert.equal(seen.length, 2);
  assert.ok(seen[0]!.headers["Idempotency-Key"]);
  assert.equal(seen[0]!.headers["Idempotency-Key"], seen[1]!.headers["Idempotency-Key"]);
  assert.equal(seen[0]!.headers["Prefer"], undefined, "Prefer: wait is a start's");
  assert.equal(res.etag, '"3"');
  assert.equal(res.replayed, true);
});

test("a merge patch is sent as application/merge-patch+json with If-Match", async () => {
  const { c, seen } = client([{ status: 200, body: ss, headers: { ETag: '"4"' } }]);
  const res = await c.updateSavedSearch("ss-1", { brief: { filters: { remote: null } } }, { merge: true, ifMatch: '"3"' });
  assert.equal(seen[0]!.method, "PATCH");
  assert.equal(seen[0]!.headers["Content-Type"], "application/merge-patch+json");
  assert.equal(seen[0]!.headers["If-Match"], '"3"');
  assert.equal(res.etag, '"4"');
});

test("savedSearches iterates every page, and stops fetching when the loop stops", async () => {
  const pages: Step[] = [
    { status: 200, body: { items: [{ id: "a" }, { id: "b" }], next_cursor: "c1" } },
    { status: 200, body: { items: [{ id: "c" }], next_cursor: null } },
  ];
  let { c, seen } = client(pages);
  const ids: string[] = [];
  for await (const s of c.savedSearches({ limit: 2, archived: true })) ids.push(s.id);
  assert.deepEqual(ids, ["a", "b", "c"]);
  assert.equal(seen[0]!.url, "http://searchd.test/v1/saved-searches?limit=2&archived=true");
  assert.equal(seen[1]!.url, "http://searchd.test/v1/saved-searches?limit=2&cursor=c1&archived=true");
  ({ c, seen } = client(pages));
  for await (const _ of c.savedSearches()) break;
  assert.equal(seen.length, 1);
});

test("Retry-After reads seconds and HTTP dates", () => {
  assert.equal(parseRetryAfter("3"), 3000);
  assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4_000), 6000);
  assert.equal(parseRetryAfter("soon"), undefined);
  assert.equal(parseRetryAfter(null), undefined);
});

test("preferWaitSeconds is bounded", () => {
  assert.throws(() => new SearchdClient({ baseUrl: "http://x", token: "t", retry: { preferWaitSeconds: 31 } }), RangeError);
  const { c, seen } = client([{ status: 201, body: started }], { preferWaitSeconds: 0 });
  return c.startRun({ kind: "capability", name: "web.search" }).then(() => assert.equal(seen[0]!.headers["Prefer"], undefined));
});

const sched = { saved_search_id: "ss-1", cron: "0 9 * * 1-5", interval_seconds: null, paused: false, version: 1 };

test("a schedule set carries one key on every retry, If-Match, and says created or replayed", async () => {
  const { c, seen } = client([
    { status: 503, body: problem(503, "unavailable"), headers: { "Retry-After": "1" } },
    { status: 201, body: sched, headers: { ETag: '"1"' } },
  ]);
  const res = await c.setSchedule("ss 1", { cron: "0 9 * * 1-5", time_zone: "Europe/Berlin" }, { ifMatch: '"7"' });
  assert.equal(seen.length, 2);
  assert.equal(seen[0]!.method, "PUT");
  assert.equal(seen[0]!.url, "http://searchd.test/v1/saved-searches/ss%201/schedule");
  assert.equal(seen[0]!.headers["Idempotency-Key"], seen[1]!.headers["Idempotency-Key"]);
  assert.equal(seen[1]!.headers["If-Match"], '"7"');
  assert.equal(res.created, true);
  assert.equal(res.replayed, false);
  assert.equal(res.etag, '"1"');
  assert.equal(res.schedule.cron, "0 9 * * 1-5");
  const again = client([{ status: 200, body: sched, headers: { ETag: '"2"', "Idempotent-Replayed": "true" } }]);
  const replay = await again.c.setSchedule("ss-1", { interval_seconds: 3600 }, { idempotencyKey: "mine" });
  assert.equal(again.seen[0]!.headers["Idempotency-Key"], "mine");
  assert.equal(replay.created, false);
  assert.equal(replay.replayed, true);
});

test("pause retries without If-Match and never with it; remove is never retried", async () => {
  let { c, seen } = client([{ status: 503, body: problem(503, "unavailable") }, { status: 200, body: { ...sched, paused: true } }]);
  const paused = await c.pauseSchedule("ss-1");
  assert.equal(seen.length, 2);
  assert.equal(seen[0]!.url, "http://searchd.test/v1/saved-searches/ss-1/schedule/pause");
  assert.equal(paused.schedule.paused, true);
  ({ c, seen } = client([{ status: 503, body: problem(503, "unavailable") }, { status: 200, body: sched }]));
  await assert.rejects(c.resumeSchedule("ss-1", { ifMatch: '"2"' }), (e: SearchdError) => e.status === 503);
  assert.equal(seen.length, 1);
  assert.equal(seen[0]!.headers["If-Match"], '"2"');
  ({ c, seen } = client([{ status: 503, body: problem(503, "unavailable") }, { status: 204 }]));
  await assert.rejects(c.removeSchedule("ss-1"), (e: SearchdError) => e.status === 503);
  assert.equal(seen.length, 1);
  assert.equal(seen[0]!.method, "DELETE");
});

test("occurrences iterates every page", async () => {
  const { c, seen } = client([
    { status: 200, body: { items: [{ id: "o2", status: "started" }], next_cursor: "c1" } },
    { status: 200, body: { items: [{ id: "o1", status: "missed" }], next_cursor: null } },
  ]);
  const ids: string[] = [];
  for await (const o of c.occurrences("ss-1", { limit: 1 })) ids.push(o.id);
  assert.deepEqual(ids, ["o2", "o1"]);
  assert.equal(seen[1]!.url, "http://searchd.test/v1/saved-searches/ss-1/occurrences?limit=1&cursor=c1");
});
