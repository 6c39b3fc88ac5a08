// Tests of the runtime's side: verifying a dispatch signed by searchd's Go
// signer (the Standard Webhooks library), and reporting a Run's status.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { DispatchVerificationError, SearchdClient, SearchdError, isCancel, verifyCancel, verifyDispatch } from "../src/index.js";

const secret = "whsec_c2VhcmNoZC10cy1jbGllbnQtdGVzdC1zZWNyZXQtMzI=";
const id = "0f8e4a2c-6b1d-4e3f-9a57-c2d8e1f0b4a6";
const ts = 1796117472;
const body = `{"type":"run.admitted","timestamp":"2026-12-01T09:31:12.5Z","data":{"run":{"id":"${id}","organization_id":"d0d0d0d0-0000-4000-8000-000000000001","kind":"capability","saved_search_id":null,"snapshot_id":null,"name":"enrich","options":null,"input":{"domain":"example.com"},"created_by":"alice","created_at":"2026-12-01T09:31:12.5Z","idempotency_key":"k"},"snapshot":null,"status_url":"/v1/runs/${id}/status"}}`;
// Made by github.com/standard-webhooks/standard-webhooks/libraries/go, the
// signer searchd's dispatcher uses, for this secret, id, timestamp and body.
const goSignature = "v1,TJyXowNsIfJh51KBAstRiYk8HwNaZ1RhPAoT+BDG+Og=";
const headers = { "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": goSignature };
const now = ts * 1000 + 30_000;

test("a dispatch signed by searchd's signer verifies and decodes", async () => {
  const d = await verifyDispatch(secret, headers, body, { now });
  assert.equal(d.data.run.id, id);
  assert.equal(d.data.snapshot, null);
  assert.equal(d.data.status_url, `/v1/runs/${id}/status`);
  // Several signatures (a rotation): any v1 one that matches will do.
  await verifyDispatch(secret, { ...headers, "webhook-signature": "v1,bm90IGl0 " + goSignature }, body, { now });
  // Node's own HMAC agrees (an implementation independent of ours).
  const key = Buffer.from(secret.slice(6), "base64");
  const mine = createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64");
  assert.equal("v1," + mine, goSignature);
});

test("anything else does not verify", async () => {
  const cases: [string, Record<string, string>, string, number][] = [
    ["a changed body", headers, body.replace("enrich", "Enrich"), now],
    ["another secret", headers, body, now],
    ["too old", headers, body, ts * 1000 + 301_000],
    ["from the future", headers, body, ts * 1000 - 301_000],
    ["no signature", { "webhook-id": id, "webhook-timestamp": String(ts) }, body, now],
    ["another webhook-id", { ...headers, "webhook-id": "00000000-0000-4000-8000-000000000000" }, body, now],
  ];
  for (const [name, h, b, at] of cases) {
    const s = name === "another secret" ? "whsec_" + Buffer.from("another-secret-of-32-bytes-long!").toString("base64") : secret;
    await assert.rejects(verifyDispatch(s, h, b, { now: at }), DispatchVerificationError, name);
  }
});

test("a status report is a PUT retried like a read; run_finished is final", async () => {
  const seen: { method: string; url: string; body?: string; auth: string }[] = [];
  const answers = [
    () => { throw new TypeError("Failed to fetch"); },
    () => new Response(JSON.stringify({ id, status: "succeeded", version: 3 }), { status: 200, headers: { "Content-Type": "application/json" } }),
    () => new Response(JSON.stringify({ type: "/problems/run_finished", title: "Run finished", status: 409, detail: "d", code: "run_finished", current_status: "succeeded", current_version: 3 }),
      { status: 409, headers: { "Content-Type": "application/problem+json" } }),
  ];
  const fetch = (async (url: string, init?: RequestInit) => {
    seen.push({ method: init?.method ?? "GET", url, body: init?.body as string, auth: (init?.headers as Record<string, string>)["Authorization"]! });
    return answers[seen.length - 1]!();
  }) as unknown as typeof globalThis.fetch;
  const c = new SearchdClient({ baseUrl: "http://searchd.test", token: "runtime-token", fetch, sleep: async () => {} });
  const run = await c.reportRunStatus(id, { status: "succeeded", result_ref: "s3://r" });
  assert.equal(run.version, 3);
  assert.equal(seen.length, 2, "retried after the network failure");
  assert.deepEqual(seen.map((s) => s.method), ["PUT", "PUT"]);
  assert.equal(seen[1]!.url, `http://searchd.test/v1/runs/${id}/status`);
  assert.equal(seen[1]!.body, '{"status":"succeeded","result_ref":"s3://r"}');
  assert.equal(seen[1]!.auth, "Bearer runtime-token");
  await assert.rejects(c.reportRunStatus(id, { status: "running" }), (e: unknown) => {
    assert.ok(e instanceof SearchdError);
    assert.equal(e.code, "run_finished");
    assert.equal(e.problem?.current_status, "succeeded");
    return true;
  });
  assert.equal(seen.length, 3, "run_finished is not retried");
});

test("a cancel is a POST retried like a read, with its reason; run_finished is final", async () => {
  const seen: { method: string; url: string; body?: string }[] = [];
  const answers = [
    () => { throw new TypeError("Failed to fetch"); },
    () => new Response(JSON.stringify({ id, status: "running", version: 3, cancel_requested_at: "2026-12-01T09:35:40.2Z" }),
      { status: 200, headers: { "Content-Type": "application/json" } }),
    () => new Response(JSON.stringify({ type: "/problems/run_finished", title: "Run finished", status: 409, detail: "d", code: "run_finished", current_status: "succeeded", current_version: 4 }),
      { status: 409, headers: { "Content-Type": "application/problem+json" } }),
  ];
  const fetch = (async (url: string, init?: RequestInit) => {
    seen.push({ method: init?.method ?? "GET", url, body: init?.body as string });
    return answers[seen.length - 1]!();
  }) as unknown as typeof globalThis.fetch;
  const c = new SearchdClient({ baseUrl: "http://searchd.test", token: "user-token", fetch, sleep: async () => {} });
  const run = await c.cancelRun(id, { reason: "wrong search" });
  assert.equal(run.cancel_requested_at, "2026-12-01T09:35:40.2Z");
  assert.equal(seen.length, 2, "retried after the network failure");
  assert.deepEqual(seen.map((s) => s.method), ["POST", "POST"]);
  assert.equal(seen[1]!.url, `http://searchd.test/v1/runs/${id}/cancel`);
  assert.equal(seen[1]!.body, '{"reason":"wrong search"}');
  await assert.rejects(c.cancelRun(id), (e: unknown) => {
    assert.ok(e instanceof SearchdError);
    assert.equal(e.code, "run_finished");
    return true;
  });
  assert.equal(seen.length, 3, "run_finished is not retried");
  assert.equal(seen[2]!.body, "{}");
});

test("a cancel request verifies as one, and is no dispatch", async () => {
  const cid = `cancel_${id}`;
  const cbody = `{"type":"run.cancel_requested","timestamp":"2026-12-01T09:35:40.2Z","data":{"run":{"id":"${id}","organization_id":"d0d0d0d0-0000-4000-8000-000000000001"},"reason":"wrong search","status_url":"/v1/runs/${id}/status"}}`;
  const key = Buffer.from(secret.slice(6), "base64");
  const sig = "v1," + createHmac("sha256", key).update(`${cid}.${ts}.${cbody}`).digest("base64");
  const h = { "webhook-id": cid, "webhook-timestamp": String(ts), "webhook-signature": sig };
  assert.ok(isCancel(h));
  assert.ok(!isCancel(headers));
  const c = await verifyCancel(secret, h, cbody, { now });
  assert.equal(c.data.run.id, id);
  assert.equal(c.data.reason, "wrong search");
  await assert.rejects(verifyDispatch(secret, h, cbody, { now }), DispatchVerificationError, "a cancel is no dispatch");
  await assert.rejects(verifyCancel(secret, headers, body, { now }), DispatchVerificationError, "a dispatch is no cancel");
  await assert.rejects(verifyCancel(secret, h, cbody.replace("wrong", "right"), { now }), DispatchVerificationError, "a changed body");
});
