// The browser test of examples/web: the Vite page in Debian's headless
// Chromium (driven by playwright-core), its /session endpoint minting
// tokens with the secret of a real `searchd dev` (its own PostgreSQL),
// which allows the page's origin (SEARCHD_CORS_ORIGINS). Each case starts
// a saved search of its own the way a user repeats a start, and asserts
// from the API that searchd admitted exactly one Run, under the one key
// every start request of that action carried:
//   - a double click;
//   - a reload while the start is out: the server committed the Run, the
//     page never saw the answer, and the reloaded page resumes the start
//     with the key it kept;
//   - a Retry after the page gave up waiting (?timeoutMs).
// And the page follows its Run live: the test plays the runtime (status
// reports with a runtime credential) and waits for the page to show
// each status, through the Run's event stream, without a reload.
// SEARCHD_BIN names the searchd binary (default ../../bin/searchd);
// SCREENSHOTS names a directory for the screenshots (default: a temporary
// one, printed). `make web-example` runs it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { createServer as createNetServer } from "node:net";
import { mkdtemp, chmod, rm, mkdir, readFile } from "node:fs/promises";
import { createHmac } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createServer } from "vite";
import { chromium } from "playwright-core";
import { chromiumOptions } from "../../../test/chromium.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const searchdBin = process.env.SEARCHD_BIN ?? path.resolve(root, "../../bin/searchd");
let shots = process.env.SCREENSHOTS;

let vite, dev, devDir, devLog = "", browser, origin, base;

before(async () => {
  // Vite reads port 0 as its default, 5173: a free port the OS picked
  // instead, so tests beside this one on the machine do not collide.
  const port = await new Promise((resolve, reject) => {
    const s = createNetServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
  vite = await createServer({ root, configFile: path.join(root, "vite.config.ts"), server: { port, strictPort: true }, logLevel: "warn" });
  await vite.listen();
  origin = new URL(vite.resolvedUrls.local[0]).origin;

  // searchd dev in a directory of its own, reachable by the postgres user
  // dev runs PostgreSQL as when we are root, on a port the OS picks.
  devDir = await mkdtemp(path.join(tmpdir(), "searchd-web-"));
  await chmod(devDir, 0o755);
  dev = spawn(searchdBin, ["dev"], {
    cwd: devDir,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, SEARCHD_ADDR: "127.0.0.1:0", SEARCHD_CORS_ORIGINS: origin },
    stdio: ["ignore", "pipe", "pipe"],
  });
  dev.stderr.on("data", (b) => (devLog += b));
  base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dev did not serve within 3 minutes:\n${devLog}`)), 180_000);
    dev.on("exit", (code) => reject(new Error(`dev exited ${code}:\n${devLog}`)));
    createInterface({ input: dev.stdout }).on("line", (line) => {
      const m = /^Serving on (http:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  // Where the page's backend finds searchd and the secret it signs with.
  process.env.SEARCHD_URL = base;
  process.env.SEARCHD_JWT_SECRET_FILE = path.join(devDir, ".searchd-dev", "jwt-secret");

  browser = await chromium.launch(chromiumOptions());
  if (!shots) shots = await mkdtemp(path.join(tmpdir(), "searchd-web-shots-"));
  await mkdir(shots, { recursive: true });
  console.log(`page ${origin}, searchd ${base}, screenshots in ${shots}`);
});

after(async () => {
  await browser?.close();
  await vite?.close();
  if (dev && dev.exitCode === null) {
    const exited = new Promise((resolve) => dev.on("exit", resolve));
    dev.kill("SIGINT");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 60_000))]);
    if (dev.exitCode === null) dev.kill("SIGKILL");
  }
  if (devDir) await rm(devDir, { recursive: true, force: true });
});

// api calls searchd as the page's user, with a token from the page's backend.
async function api(method, p, body) {
  const { token } = await (await fetch(`${origin}/session`)).json();
  const res = await fetch(base + p, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function savedSearch(name) {
  const r = await api("POST", "/v1/saved-searches", { name, brief: { query: `${name.toLowerCase()} engineer`, filters: { remote: true } } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.id;
}

// The Runs searchd admitted for saved search id, each read whole.
async function runsOf(id) {
  const list = await api("GET", `/v1/runs?saved_search_id=${id}`);
  assert.equal(list.status, 200, JSON.stringify(list.body));
  return Promise.all(list.body.items.map(async (r) => (await api("GET", `/v1/runs/${r.id}`)).body));
}

// openPage opens the page and records the Idempotency-Key of every start
// request it sends for saved search id.
async function openPage(id, { width = 1280, height = 800, query = "" } = {}) {
  const page = await browser.newPage({ viewport: { width, height } });
  // A busy machine: Vite's first transform of the page and the client can
  // take most of Playwright's default 30 s.
  page.setDefaultTimeout(120_000);
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const keys = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url() === `${base}/v1/saved-searches/${id}/start`) keys.push(r.headers()["idempotency-key"]);
  });
  await page.goto(`${origin}/${query}`);
  await page.locator(`button[data-start="${id}"]`).waitFor();
  return { page, keys, errors };
}

const statusOf = (page, id) => page.locator(`p[data-status="${id}"]`);

async function assertOneRun(id, keys, page) {
  const runs = await runsOf(id);
  assert.equal(runs.length, 1, `saved search ${id} has ${runs.length} Runs: ${JSON.stringify(runs)}`);
  assert.ok(keys.length >= 1, "the page sent no start");
  assert.deepEqual(new Set(keys), new Set([runs[0].idempotency_key]), `the start requests carried keys ${keys}; the Run was admitted under ${runs[0].idempotency_key}`);
  assert.equal(await statusOf(page, id).getAttribute("data-run"), runs[0].id, "the page shows another Run than searchd admitted");
  assert.equal(runs[0].created_by, "web-example-user");
  return runs[0];
}

test("a double click starts one Run", async () => {
  const id = await savedSearch("Double click");
  const { page, keys, errors } = await openPage(id);
  await page.locator(`button[data-start="${id}"]`).dblclick();
  await statusOf(page, id).and(page.locator("[data-run]")).waitFor();
  await assertOneRun(id, keys, page);
  assert.equal(keys.length, 1, `a double click sent ${keys.length} starts`);
  assert.match(await statusOf(page, id).textContent(), /a new Run/);
  assert.deepEqual(errors, []);
  await page.close();
});

test("a reload while the start is out resumes it with its key: one Run", async () => {
  const id = await savedSearch("Reload");
  const { page, keys, errors } = await openPage(id);
  // The first start reaches searchd, which commits the Run; its answer
  // never reaches the page, which is reloaded meanwhile.
  let committed;
  const serverAnswered = new Promise((r) => (committed = r));
  let first = true;
  await page.route(`${base}/v1/saved-searches/${id}/start`, async (route) => {
    if (route.request().method() !== "POST" || !first) return route.continue();
    first = false;
    const res = await route.fetch();
    committed(res.status());
  });
  await page.locator(`button[data-start="${id}"]`).click();
  assert.equal(await serverAnswered, 201, "searchd did not admit the first start");
  assert.equal((await runsOf(id)).length, 1);
  await page.reload();
  await statusOf(page, id).and(page.locator("[data-run]")).waitFor();
  const run = await assertOneRun(id, keys, page);
  assert.equal(keys.length, 2, `want the lost start and the resumed one, got ${keys.length}`);
  assert.equal(await statusOf(page, id).getAttribute("data-replayed"), "true");
  assert.match(await statusOf(page, id).textContent(), /before the reload/);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("searchd-example:pending-starts")), "{}", "the answered start is still pending");
  assert.ok(run.id);
  assert.deepEqual(errors, []);
  await page.close();
});

test("a Retry after the page stopped waiting sends the same key: one Run", async () => {
  const id = await savedSearch("Retry after timeout");
  const { page, keys, errors } = await openPage(id, { query: "?timeoutMs=1500" });
  // The first answer is held past the page's 1.5 s.
  let first = true;
  await page.route(`${base}/v1/saved-searches/${id}/start`, async (route) => {
    if (route.request().method() !== "POST" || !first) return route.continue();
    first = false;
    const res = await route.fetch();
    await new Promise((r) => setTimeout(r, 3000));
    await route.fulfill({ response: res }).catch(() => {});
  });
  await page.locator(`button[data-start="${id}"]`).click();
  const retry = statusOf(page, id).locator("button.retry");
  await retry.waitFor();
  assert.match(await statusOf(page, id).textContent(), /No answer after 1.5 s/);
  await page.screenshot({ path: path.join(shots, "web-retry-desktop.png") });
  await retry.click();
  await statusOf(page, id).and(page.locator("[data-run]")).waitFor();
  await assertOneRun(id, keys, page);
  assert.equal(keys.length, 2, `want the timed-out start and the Retry, got ${keys.length}`);
  assert.equal(await statusOf(page, id).getAttribute("data-replayed"), "true");
  await page.screenshot({ path: path.join(shots, "web-desktop.png") });
  assert.deepEqual(errors, []);
  await page.close();
});

test("at a phone's width (390 px)", async () => {
  const id = await savedSearch("Phone");
  const { page, keys, errors } = await openPage(id, { width: 390, height: 844 });
  await page.locator(`button[data-start="${id}"]`).click();
  await statusOf(page, id).and(page.locator("[data-run]")).waitFor();
  await assertOneRun(id, keys, page);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.equal(overflow, 0, `the page is ${overflow} px wider than a 390 px screen`);
  await page.screenshot({ path: path.join(shots, "web-390.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

// runtimeReport reports Run id's status as the runtime would: a runtime
// credential (role runtime) of the page's organization, signed with dev's
// secret, as `searchd token --runtime` mints one.
async function runtimeReport(id, body) {
  const secret = (await readFile(process.env.SEARCHD_JWT_SECRET_FILE, "utf8")).trim();
  const { organization } = await (await fetch(`${origin}/session`)).json();
  const part = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const iat = Math.floor(Date.now() / 1000);
  const signed = `${part({ alg: "HS256", typ: "JWT" })}.${part({ org_id: organization, sub: "web-example-runtime", role: "runtime", iat, exp: iat + 600 })}`;
  const token = `${signed}.${createHmac("sha256", secret).update(signed).digest("base64url")}`;
  const res = await fetch(`${base}/v1/runs/${id}/status`, {
    method: "PUT", headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  assert.equal(res.status, 200, await res.text());
}

test("the page follows its Run to succeeded live, through the Run's event stream", async () => {
  const id = await savedSearch("Live");
  const { page, keys, errors } = await openPage(id);
  const streams = [];
  page.on("request", (r) => { if (r.method() === "GET" && r.url().includes("/events")) streams.push(r.headers()["last-event-id"]); });
  await page.locator(`button[data-start="${id}"]`).click();
  const status = statusOf(page, id);
  await status.and(page.locator('[data-run-status="queued"]')).waitFor();
  const run = await assertOneRun(id, keys, page);
  await runtimeReport(run.id, { status: "running" });
  await status.and(page.locator('[data-run-status="running"]')).waitFor();
  assert.equal(await status.locator(".run-status").textContent(), "running");
  await runtimeReport(run.id, { status: "succeeded", result_ref: "s3://results/live" });
  await status.and(page.locator('[data-run-status="succeeded"]')).waitFor();
  assert.equal(await status.locator(".run-status").textContent(), "succeeded");
  assert.match(await status.textContent(), /succeeded: a new Run/);
  // One stream, from the version the start answered: no reload, no poll.
  assert.deepEqual(streams, ["1"], `the page opened streams with Last-Event-ID ${JSON.stringify(streams)}`);
  assert.deepEqual(errors, []);
  await page.close();
});
