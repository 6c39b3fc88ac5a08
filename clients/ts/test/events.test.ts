// Tests of followRun and the Server-Sent Events parser against a scripted
// fetch whose bodies arrive in chunks cut anywhere.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SearchdClient, SearchdError, serverSentEvents, type RunEvent } from "../src/index.js";

const run = "0f8e4a2c-6b1d-4e3f-9a57-c2d8e1f0b4a6";

function event(seq: number, status: string): string {
  const type = status === "queued" ? "run.admitted" : `run.${status}`;
  const e: RunEvent = { run_id: run, seq, type: type as RunEvent["type"], status: status as RunEvent["status"], occurred_at: "2026-12-01T09:31:12.5Z" };
  return `id: ${seq}\r\nevent: ${type}\r\ndata: ${JSON.stringify(e)}\r\n\r\n`;
}

/** A body that sends text in chunks of n bytes. */
function chunked(text: string, n: number): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) { c.close(); return; }
      c.enqueue(bytes.slice(at, at + n));
      at += n;
    },
  });
}

test("the parser reads events cut at every byte, with CRLF, comments and retry", async () => {
  const text = "retry: 1500\r\n\r\n: keep-alive\n\n" + event(1, "queued") + "data: a\rdata: b\r\r" + "data: no blank line";
  for (const n of [1, 2, 7, 1000]) {
    const retries: number[] = [];
    const got = [];
    for await (const m of serverSentEvents(chunked(text, n), (ms) => retries.push(ms))) got.push(m);
    assert.deepEqual(retries, [1500], `chunks of ${n}`);
    assert.equal(got.length, 2, `chunks of ${n}`);
    assert.equal(got[0]!.id, "1");
    assert.equal(got[0]!.event, "run.admitted");
    assert.equal(JSON.parse(got[0]!.data).seq, 1);
    assert.deepEqual([got[1]!.event, got[1]!.data, got[1]!.id], ["message", "a\nb", "1"]);
  }
});

test("followRun resumes with Last-Event-ID after a cut stream and a 503, yields each event once, ends at the terminal one", async () => {
  const seen: Record<string, string>[] = [];
  const answers: (() => Response)[] = [
    () => new Response(chunked("retry: 1500\n\n" + event(1, "queued") + event(2, "dispatched"), 5), { headers: { "Content-Type": "text/event-stream" } }),
    () => new Response(JSON.stringify({ type: "/problems/too_many_streams", title: "Too many event streams", status: 503, detail: "full", code: "too_many_streams" }),
      { status: 503, headers: { "Content-Type": "application/problem+json", "Retry-After": "1" } }),
    () => new Response(chunked(event(2, "dispatched") + event(3, "running") + event(4, "succeeded") + event(5, "running"), 3), { headers: { "Content-Type": "text/event-stream" } }),
  ];
  const fetch = (async (_url: string, init?: RequestInit) => {
    seen.push({ ...(init?.headers as Record<string, string>) });
    return answers[seen.length - 1]!();
  }) as typeof globalThis.fetch;
  const waits: number[] = [];
  const c = new SearchdClient({ baseUrl: "http://searchd.test", token: "tok", fetch, sleep: async (ms) => { waits.push(ms); }, random: () => 0.5 });
  const got: string[] = [];
  for await (const e of c.followRun(run)) got.push(`${e.seq} ${e.type}`);
  assert.deepEqual(got, ["1 run.admitted", "2 run.dispatched", "3 run.running", "4 run.succeeded"]);
  assert.deepEqual(seen.map((h) => h["Last-Event-ID"]), ["0", "2", "2"]);
  assert.equal(seen[0]!["Authorization"], "Bearer tok");
  assert.deepEqual(waits, [1500, 1000]);
});

test("followRun ends at 204 and throws a refusal that is final", async () => {
  const c204 = new SearchdClient({ baseUrl: "http://searchd.test", token: "tok", fetch: (async () => new Response(null, { status: 204 })) as typeof globalThis.fetch });
  for await (const e of c204.followRun(run, { lastEventId: 4 })) assert.fail(`204 yielded ${JSON.stringify(e)}`);
  const c404 = new SearchdClient({
    baseUrl: "http://searchd.test", token: "tok",
    fetch: (async () => new Response(JSON.stringify({ type: "/problems/not_found", title: "Not found", status: 404, detail: "no such run", code: "not_found" }),
      { status: 404, headers: { "Content-Type": "application/problem+json" } })) as typeof globalThis.fetch,
  });
  await assert.rejects(async () => { for await (const _ of c404.followRun(run)) { /* none */ } },
    (e: unknown) => e instanceof SearchdError && e.code === "not_found" && e.status === 404);
});
