// Browser tests of the searchd console: Debian's chromium, driven by
// playwright-core, against a real searchd serve on a throwaway PostgreSQL
// (the Go fixture next to this file starts both and seeds them).
//
//   SEARCHD_BIN      the searchd binary (required; make test-console builds it)
//   CONSOLE_FIXTURE  the fixture binary (required; likewise)
//   CHROMIUM         the browser (default /usr/bin/chromium; see ../chromium.mjs)
//   SCREENSHOTS      a directory to write the pages' screenshots to (optional)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { layoutProblems, widths } from "./layout.mjs";
import { requireEnv, shot, shots, startWorld } from "./world.mjs";

requireEnv("SEARCHD_BIN", "CONSOLE_FIXTURE");

let world, browser, ask, stop;
before(async () => ({ world, browser, ask, stop } = await startWorld()));
after(() => stop?.());

// session opens a browser context signed in with token, width px wide
// (1440 unless said), and collects every CSP violation or page error so a
// test can assert there was none.
// short is the console's short form of an id (console/render.go shortID):
// the random last 8 characters of a time-ordered (version 7) UUID, the
// first 8 of any other.
function short(id) {
  return id[14] === "7" ? id.slice(-8) : id.slice(0, 8);
}

async function session(token, width = 1440) {
  const ctx = await browser.newContext({ viewport: { width, height: 900 } });
  const page = await ctx.newPage();
  page.problems = [];
  page.on("console", (m) => { if (m.type() === "error") page.problems.push(m.text() + " (" + (m.location().url || page.url()) + ")"); });
  page.on("pageerror", (e) => page.problems.push(String(e)));
  await page.goto(world.base + "/console/");
  assert.match(page.url(), /\/console\/sign-in$/, "an unsigned visit lands on the sign-in form");
  await page.fill("#token", token);
  await Promise.all([page.waitForNavigation(), page.click("#token-sign-in")]);
  assert.doesNotMatch(page.url(), /token|eyJ/, "the token is never in a URL");
  return { ctx, page };
}

const layoutShots = process.env.LAYOUT_SHOTS || "";

test("sign-in page: a strict CSP and no token in the cookie's reach of scripts", async () => {
  const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await ctx.newPage();
  const resp = await page.goto(world.base + "/console/sign-in");
  const csp = resp.headers()["content-security-policy"];
  assert.match(csp, /script-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline/);
  await shot(page, "sign-in");
  await page.fill("#token", world.token_a);
  await Promise.all([page.waitForNavigation(), page.click("#token-sign-in")]);
  const cookies = await ctx.cookies();
  const c = cookies.find((c) => c.name === "searchd_console");
  assert.ok(c, "a session cookie is set");
  assert.equal(c.httpOnly, true);
  assert.equal(c.sameSite, "Strict");
  assert.equal(await page.evaluate(() => document.cookie), "", "no script can read the session");
  await ctx.close();
});

test("an auditor opens a saved search, compares two snapshots and opens a Run", async () => {
  const { ctx, page } = await session(world.token_a);
  assert.match(page.url(), /\/console\/saved-searches$/);
  await page.getByRole("link", { name: world.search_name }).waitFor();
  assert.equal(await page.getByText(world.search_b_name).count(), 0, "no other organization's saved search");
  assert.equal(await page.getByText(world.archived_name).count(), 0, "archived ones are hidden by default");
  await page.check("input[name=archived]");
  await Promise.all([page.waitForNavigation(), page.click("form.filters button[type=submit]")]);
  await page.getByText(world.archived_name).waitFor();
  await shot(page, "saved-searches");

  await Promise.all([page.waitForNavigation(), page.getByRole("link", { name: world.search_name }).click()]);
  const rows = page.locator("table.timeline tbody tr");
  assert.equal(await rows.count(), 2, "two snapshots on the timeline");
  assert.match(await rows.nth(0).innerText(), /bob/);
  assert.match(await rows.nth(1).innerText(), /alice/);
  await shot(page, "saved-search");

  // The newest is B and the one before A by default; compare them.
  await Promise.all([page.waitForNavigation(), page.click("#compare")]);
  assert.match(page.url(), /\/compare\?/);
  assert.equal((await page.locator("ul.diff-items li.added").innerText()).replace(/^\+/, "").trim(), world.added_item);
  assert.equal((await page.locator("ul.diff-items li.removed").innerText()).replace(/^−/, "").trim(), world.removed_item);
  const fields = await page.locator("table.diff tbody").innerText();
  assert.match(fields, /filters\.remote\s+changed\s+true\s+false/);
  assert.match(fields, /filters\.seniority\s+added/);
  await shot(page, "compare");

  await page.goto(world.base + "/console/runs");
  await page.fill("input[name=key]", world.second_key);
  await Promise.all([page.waitForNavigation(), page.click("form.filters button[type=submit]")]);
  const runRows = page.locator("table.list tbody tr");
  assert.equal(await runRows.count(), 1, "the key filter finds one Run");
  await shot(page, "runs");
  await Promise.all([page.waitForNavigation(), runRows.first().locator("a").first().click()]);
  assert.match(page.url(), new RegExp("/console/runs/" + world.second_run));
  const body = await page.locator("main").innerText();
  assert.match(body, new RegExp(world.second_key));
  assert.match(body, /bob/);
  assert.match(body, /queued/);
  assert.match(body, /acme-job-5521/);
  // The timeline: admitted, a 503 then a delivery, dispatched, the
  // runtime's reports, in that order.
  const events = await page.locator("section:has(h2:text('Timeline')) table.list tbody tr").allInnerTexts();
  const order = [/admitted/, /delivery 1[\s\S]*503 Service Unavailable/, /delivery 2[\s\S]*delivered/, /status[\s\S]*dispatched/,
    /reported[\s\S]*running[\s\S]*runtime-eu-1/, /reported[\s\S]*succeeded[\s\S]*runtime-eu-1/];
  assert.equal(events.length, order.length, "one timeline row per event: " + JSON.stringify(events));
  order.forEach((re, i) => assert.match(events[i], re, "timeline row " + i));
  assert.match(events[5], new RegExp(world.result_ref.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")));
  await shot(page, "run");

  await Promise.all([page.waitForNavigation(), page.getByRole("link", { name: short(world.job) }).click()]);
  const job = await page.locator("main").innerText();
  assert.match(job, /msg_2Kx1/);
  assert.match(job, /duplicate/);
  assert.match(job, /hash_mismatch/);
  await shot(page, "provider-job");

  const resp = await page.goto(world.base + "/console/operator/claims");
  assert.equal(resp.status(), 403, "an organization token never reaches the operator views");
  assert.equal(await page.getByText(world.stuck_key).count(), 0);
  assert.deepEqual(page.problems.filter((p) => !/403/.test(p)), [], "no CSP violation or script error");
  await ctx.close();
});

test("a Run page follows its Run live: each status the runtime reports appears without a reload", async () => {
  // A Run of organization A, started through the API, queued.
  const api = (method, path, token, body, headers = {}) => fetch(world.base + path, {
    method, headers: { Authorization: "Bearer " + token, "Content-Type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const started = await api("POST", "/v1/runs", world.token_a, { kind: "definition", name: "live run page" }, { "Idempotency-Key": "live-" + Date.now() });
  assert.equal(started.status, 201, await started.clone().text());
  const run = (await started.json()).run.id;
  const report = async (body) => {
    const res = await api("PUT", "/v1/runs/" + run + "/status", world.runtime_a, body);
    assert.equal(res.status, 200, await res.text());
  };

  const { ctx, page } = await session(world.token_a);
  const streams = [];
  page.on("request", (r) => { if (r.url().includes("/events")) streams.push(r.url()); });
  await page.goto(world.base + "/console/runs/" + run);
  const badge = page.locator("#run-status");
  assert.equal(await badge.innerText(), "queued");
  const rows = page.locator("#run-timeline tr");
  const before = await rows.count();
  await page.locator("#run-live").filter({ hasText: "Following this Run live" }).waitFor();

  await report({ status: "running" });
  await page.locator("#run-status.b-running").waitFor();
  assert.equal(await page.locator("#run-version").innerText(), "2");
  await report({ status: "succeeded", result_ref: "s3://results/live-page" });
  await page.locator("#run-status.b-succeeded").waitFor();
  await page.locator("#run-live").filter({ hasText: "The Run finished" }).waitFor();
  assert.equal(await page.locator("#run-version").innerText(), "3");
  const added = await rows.allInnerTexts();
  assert.equal(added.length, before + 2, "one timeline row per event: " + JSON.stringify(added));
  assert.match(added.at(-2), /running[\s\S]*version 2/);
  assert.match(added.at(-1), /succeeded[\s\S]*version 3[\s\S]*s3:\/\/results\/live-page/);
  assert.deepEqual(streams, [world.base + "/console/runs/" + run + "/events?last_event_id=1"], "one stream, from the version the page showed");
  await shot(page, "run-live");

  // A finished Run's page follows nothing: a reload shows the same, with no stream.
  await page.reload();
  assert.equal(await badge.innerText(), "succeeded");
  assert.equal(await page.locator("#run-live").count(), 0);
  assert.equal(streams.length, 1, "a finished Run's page opened a stream");
  assert.deepEqual(page.problems, [], "no CSP violation or script error");
  await ctx.close();
});

test("an auditor sees a saved search's schedule and its occurrences, on a desktop and on a phone", async () => {
  const { ctx, page } = await session(world.token_a);
  await Promise.all([page.waitForNavigation(), page.getByRole("link", { name: world.scheduled_name }).click()]);
  const card = await page.locator("#schedule .card").innerText();
  assert.match(card, /cron 0 9 \* \* \*/);
  assert.match(card, /Europe\/Berlin/);
  assert.match(card, /live/);
  const rows = page.locator("table.occurrences tbody tr");
  assert.ok(await rows.count() >= 3, "the seeded occurrences are listed");
  const text = await page.locator("table.occurrences tbody").innerText();
  assert.match(text, /started/);
  assert.match(text, /missed/);
  assert.match(await page.locator("table.timeline tbody").innerText(), /scheduled/, "the timeline marks the scheduler's snapshots");
  await shot(page, "schedule");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await page.locator("table.occurrences").waitFor();
  await shot(page, "schedule-phone");
  await page.setViewportSize({ width: 1440, height: 900 });
  await Promise.all([page.waitForNavigation(), page.locator(`table.occurrences a[href="/console/runs/${world.scheduled_run}"]`).click()]);
  assert.match(await page.locator("main").innerText(), /alice/, "the scheduled Run is the schedule's actor's");
  assert.deepEqual(page.problems, []);
  await ctx.close();
});

test("an auditor of another organization sees none of it", async () => {
  const { ctx, page } = await session(world.token_b);
  await page.getByRole("link", { name: world.search_b_name }).waitFor();
  assert.equal(await page.getByText(world.search_name).count(), 0);
  for (const path of [
    "/console/saved-searches/" + world.search,
    "/console/saved-searches/" + world.search + "/compare?a=" + world.first_snapshot + "&b=" + world.second_snapshot,
    "/console/snapshots/" + world.second_snapshot,
    "/console/runs/" + world.second_run,
    "/console/provider-jobs/" + world.job,
    "/console/saved-searches/" + world.scheduled,
  ]) {
    const resp = await page.goto(world.base + path);
    assert.equal(resp.status(), 404, path + " is another organization's");
    assert.equal(await page.getByText(world.search_name).count(), 0);
  }
  await page.goto(world.base + "/console/runs?key=" + encodeURIComponent(world.second_key));
  assert.match(await page.locator("table.list tbody").innerText(), /No Run/);
  await page.goto(world.base + "/console/provider-jobs");
  assert.equal(await page.getByText("acme-job-5521").count(), 0);
  const resp = await page.goto(world.base + "/console/operator/claims");
  assert.equal(resp.status(), 403);
  await ctx.close();
});

test("the first claims page is served while the counts are read, and fills them in when the read lands", async () => {
  // The fixture locks a table only the counts' read reads: the read waits.
  assert.equal(await ask("hold drops"), "held");
  let freed = false;
  try {
    const { ctx, page } = await session(world.token_operator);
    assert.match(page.url(), /\/console\/operator\/claims$/);
    const counts = page.locator("#claim-counts");
    assert.equal(await counts.getAttribute("data-counting"), "/console/operator/claims/counts");
    assert.match(await counts.innerText(), /Counting the plane/);
    await shot(page, "claims-counting");
    // The lists are read now, counts or not.
    await page.locator("tr.stuck-row", { hasText: world.stuck_key }).waitFor();
    assert.equal(await ask("free drops"), "freed");
    freed = true;
    // console.js fetches the counts once read and puts them in place.
    await page.locator("#claim-counts:not([data-counting]) .tile-n").first().waitFor();
    assert.match(await page.locator("#claim-counts").innerText(), /\d+\s*stuck/);
    await page.locator("#claim-counts svg").first().waitFor();
    assert.deepEqual(page.problems, [], "no CSP violation or script error");
    await ctx.close();
  } finally {
    if (!freed) await ask("free drops");
  }
});

test("every page at 390, 1024 and 1440 px: no sideways scroll, no value cut or pushed off", async () => {
  const audit = [
    ["saved-searches", "/console/saved-searches?archived=1"],
    ["saved-search", "/console/saved-searches/" + world.search],
    ["schedule", "/console/saved-searches/" + world.scheduled],
    ["compare", "/console/saved-searches/" + world.search + "/compare?a=" + world.first_snapshot + "&b=" + world.second_snapshot],
    ["snapshot", "/console/snapshots/" + world.second_snapshot],
    ["runs", "/console/runs"],
    ["run", "/console/runs/" + world.second_run],
    ["run-refused", "/console/runs/" + world.direct_run],
    ["schedules", "/console/schedules"],
    ["provider-jobs", "/console/provider-jobs"],
    ["provider-job", "/console/provider-jobs/" + world.job],
  ];
  const operator = [
    ["claims", "/console/operator/claims"],
    ["uncertain", "/console/operator/uncertain"],
    ["inbound", "/console/operator/inbound"],
    ["releases", "/console/operator/releases"],
    ["sweeper", "/console/operator/sweeper"],
  ];
  if (layoutShots) mkdirSync(layoutShots, { recursive: true });
  const failures = [];
  for (const width of widths) {
    const signIn = await browser.newContext({ viewport: { width, height: 900 } });
    const p = await signIn.newPage();
    await p.goto(world.base + "/console/sign-in");
    for (const problem of await p.evaluate(layoutProblems)) failures.push(`sign-in at ${width}px: ${problem}`);
    await signIn.close();
    for (const [token, pages] of [[world.token_a, audit], [world.token_operator, operator]]) {
      const { ctx, page } = await session(token, width);
      for (const [name, path] of pages) {
        const resp = await page.goto(world.base + path);
        assert.equal(resp.status(), 200, path);
        // The claims page fills its counts in when their read lands.
        if (name === "claims") await page.locator("#claim-counts:not([data-counting])").waitFor();
        for (const problem of await page.evaluate(layoutProblems)) failures.push(`${name} at ${width}px: ${problem}`);
        if (layoutShots) await page.screenshot({ path: join(layoutShots, `${name}-${width}.png`), fullPage: true });
        if (shots && width === 390 && (name === "saved-search" || name === "claims")) await shot(page, `${name}-phone`);
      }
      assert.deepEqual(page.problems, [], "no CSP violation or script error");
      await ctx.close();
    }
  }
  assert.deepEqual(failures, [], "what a reader would miss:\n" + failures.join("\n"));
});

test("an operator sees this process's seats and queues on the claims page, on a desktop and a phone", async () => {
  for (const [name, viewport] of [["claims-admission", { width: 1440, height: 900 }], ["claims-admission-phone", { width: 390, height: 844 }]]) {
    const { ctx, page } = await session(world.token_operator);
    await page.setViewportSize(viewport);
    await page.goto(world.base + "/console/operator/claims");
    const section = page.locator("#seats");
    await section.waitFor();
    // The page itself holds seats of the operator's own flow.
    assert.match(await section.locator(".tile").first().innerText(), /^[1-9]\d* \/ \d+\s+seats in use$/);
    const own = section.locator("tr.flow-row", { hasText: world.operator });
    assert.equal(await own.count(), 1, "the operator's own flow is listed");
    assert.match(await own.innerText(), /operator/);
    await section.scrollIntoViewIfNeeded();
    const box = await section.boundingBox();
    assert.ok(box.width <= viewport.width && box.width >= viewport.width * 0.8, "the section takes the width, and no more");
    if (shots) await section.screenshot({ path: join(shots, name + ".png") });
    assert.deepEqual(page.problems, [], "no CSP violation or script error");
    await ctx.close();
  }
});

// The fixture's serve has no runtime (SEARCHD_RUNTIME_URL unset) and the
// seeded world has Runs whose dispatch is pending: issue 35.6's notice.
test("while this replica does not dispatch and Runs wait, the pages say so, on a desktop and a phone", async () => {
  for (const width of [1440, 390]) {
    const op = await session(world.token_operator, width);
    await op.page.goto(world.base + "/console/operator/claims");
    const notice = op.page.locator("#dispatch-off");
    await notice.waitFor();
    assert.match(await notice.innerText(),
      /^Dispatch is off on this replica\.\s+\d+ Runs? (are|is) waiting to be handed to the runtime, the oldest for .+ Set SEARCHD_RUNTIME_URL and SEARCHD_RUNTIME_SECRET/);
    assert.ok(await notice.isVisible(), "the operator sees the notice");
    const box = await notice.boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= width, "the notice fits the width");
    assert.deepEqual(op.page.problems, [], "no CSP violation or script error");
    await op.ctx.close();
  }
  const aud = await session(world.token_a);
  await aud.page.goto(world.base + "/console/runs");
  const notice = aud.page.locator("#dispatch-off");
  await notice.waitFor();
  assert.match(await notice.innerText(), /they stay queued until a replica with a runtime delivers them/);
  assert.doesNotMatch(await notice.innerText(), /\d+ Runs/, "an auditor is not told every organization's count");
  await aud.ctx.close();
});

test("an operator sees the stuck claim, force-releases it, and it is gone from the database", async () => {
  assert.equal(await ask("claim " + world.stuck), "present");
  const { ctx, page } = await session(world.token_operator);
  assert.match(page.url(), /\/console\/operator\/claims$/);
  const row = page.locator("tr.stuck-row", { hasText: world.stuck_key });
  await row.waitFor();
  await page.locator("#claim-counts:not([data-counting])").waitFor();
  await shot(page, "claims");
  await row.locator("input[name=reason]").fill("worker pod gone after node drain");
  page.once("dialog", (d) => d.accept());
  await Promise.all([page.waitForNavigation(), row.locator("button.danger").click()]);
  await page.locator(".alert.a-ok", { hasText: "Released claim" }).waitFor();
  assert.equal(await page.locator("tr.stuck-row", { hasText: world.stuck_key }).count(), 0, "the row is gone");
  assert.equal(await ask("claim " + world.stuck), "absent", "the claim is deleted");
  assert.equal(await ask("release " + world.stuck), world.operator + "|worker pod gone after node drain",
    "the release is recorded with who and why");

  // An uncertain call: the evidence, and a decision recorded with the actor.
  assert.equal(await ask("answer " + world.uncertain), "uncertain|");
  await page.goto(world.base + "/console/operator/uncertain");
  const call = page.locator(".uncertain-call", { hasText: world.uncertain_key });
  await call.waitFor();
  assert.match(await call.innerText(), /no acknowledgement/);
  await shot(page, "uncertain");
  await call.locator("input[name=reason]").fill("vendor console shows the message sent");
  await Promise.all([page.waitForNavigation(), call.getByRole("button", { name: "Mark delivered" }).click()]);
  await page.locator(".alert.a-ok", { hasText: "delivered" }).waitFor();
  assert.equal(await page.locator(".uncertain-call", { hasText: world.uncertain_key }).count(), 0, "no longer awaiting");
  assert.equal(await ask("answer " + world.uncertain), "ok|" + world.operator, "the answer is a success naming the operator");
  assert.match(await page.locator("#decisions").innerText(), /vendor console shows the message sent/);

  // The inbox: the stalled arrival is the backlog, and the lag is warned of.
  await page.goto(world.base + "/console/operator/inbound");
  await page.locator("tr.pending-row", { hasText: world.pending_delivery }).waitFor();
  assert.match(await page.locator("main").innerText(), /not keeping up/);
  await shot(page, "inbound");

  await page.goto(world.base + "/console/operator/releases");
  const rel = await page.locator("main").innerText();
  assert.match(rel, new RegExp(world.operator));
  assert.match(rel, /worker pod gone after node drain/);
  await shot(page, "releases");
  await page.goto(world.base + "/console/operator/sweeper");
  await page.getByText("agent.idempotency_keys").first().waitFor();
  await shot(page, "sweeper");
  assert.deepEqual(page.problems, [], "no CSP violation or script error");

  // The operator token names no organization: no audit view.
  const resp = await page.goto(world.base + "/console/saved-searches");
  assert.equal(resp.status(), 403);
  await ctx.close();
});

// Issue 37.7: an operator signed in to organization A retries the
// dispatch the runtime refused (422), with a reason; an auditor of A sees
// the Run but no form. Screenshots at 1440 and 390 px, before and after.
test("an operator retries a failed dispatch with a reason, on a desktop and a phone", async () => {
  const path = "/console/runs/" + world.direct_run;
  assert.equal(await ask("dispatch " + world.direct_run), "failed|");

  const aud = await session(world.token_a);
  await aud.page.goto(world.base + path);
  await aud.page.locator("#dispatch .retry-card").waitFor();
  assert.equal(await aud.page.locator("form.retry").count(), 0, "an auditor has no retry form");
  assert.match(await aud.page.locator("#dispatch").innerText(), /An operator retries it once the cause is fixed/);
  await aud.ctx.close();

  const { ctx, page } = await session(world.token_operator_a);
  await page.goto(world.base + path);
  const card = page.locator("#dispatch .retry-card");
  await card.waitFor();
  assert.match(await card.innerText(), /The runtime refused this Run .* with HTTP 422/);
  assert.match(await card.innerText(), /unknown capability enrich\.company/);
  await shot(page, "dispatch-failed");
  await page.setViewportSize({ width: 390, height: 844 });
  for (const problem of await page.evaluate(layoutProblems)) assert.fail(`the failed dispatch at 390px: ${problem}`);
  await page.locator("#dispatch").scrollIntoViewIfNeeded();
  await shot(page, "dispatch-failed-phone");
  await page.setViewportSize({ width: 1440, height: 900 });

  // The browser asks for a reason before anything is sent.
  await page.locator("form.retry button[type=submit]").click();
  assert.equal(await page.locator("#retry-reason").evaluate((el) => el.validity.valueMissing), true);
  assert.equal(page.url(), world.base + path, "nothing was posted");
  // Blanks pass the browser, not the server: 400, the page says why.
  await page.fill("#retry-reason", "   ");
  const [refused] = await Promise.all([page.waitForNavigation(), page.locator("form.retry button[type=submit]").click()]);
  assert.equal(refused.status(), 400);
  assert.match(await page.locator("#retry-refused").innerText(), /A reason is required/);
  assert.equal(await ask("dispatch " + world.direct_run), "failed|", "a refused retry writes nothing");
  await shot(page, "dispatch-refused");

  const reason = "runtime redeployed with enrich.company";
  await page.fill("#retry-reason", reason);
  const [done] = await Promise.all([page.waitForNavigation(), page.locator("form.retry button[type=submit]").click()]);
  assert.equal(done.status(), 200);
  assert.match(page.url(), /\?dispatch=retried$/);
  assert.match(await page.locator("#retried").innerText(), new RegExp(`Retried by ${world.operator_a} at .* UTC: ${reason}\\. The dispatch is pending now\\.`));
  const retries = page.locator("table.retries tbody tr");
  assert.equal(await retries.count(), 1);
  assert.match(await retries.first().innerText(), new RegExp(`${world.operator_a}[\\s\\S]*${reason}[\\s\\S]*HTTP 422`));
  assert.equal(await page.locator("form.retry").count(), 0, "a pending dispatch has no retry form");
  assert.match(await page.locator("section:has(h2:text('Timeline'))").innerText(), /1 attempt, 1 operator retry/);
  assert.equal(await ask("dispatch " + world.direct_run), `pending|${world.operator_a}:${reason}`, "the retry is recorded with who and why");
  await shot(page, "dispatch-retried");
  await page.setViewportSize({ width: 390, height: 844 });
  for (const problem of await page.evaluate(layoutProblems)) assert.fail(`the retried dispatch at 390px: ${problem}`);
  await page.locator("#dispatch").scrollIntoViewIfNeeded();
  await shot(page, "dispatch-retried-phone");
  assert.deepEqual(page.problems.filter((p) => !/400/.test(p)), [], "no CSP violation or script error");
  await ctx.close();
});

test("an auditor opens the schedules overview and goes to a schedule, on a desktop and a phone", async () => {
  const { ctx, page } = await session(world.token_a);
  await Promise.all([page.waitForNavigation(), page.locator("nav a", { hasText: "Schedules" }).click()]);
  assert.match(page.url(), /\/console\/schedules$/);
  const row = page.locator("tr.schedule-row", { hasText: world.scheduled_name });
  assert.equal(await page.locator("tr.schedule-row").count(), 1, "organization A's one schedule");
  const text = await row.innerText();
  assert.match(text, /cron 0 9 \* \* \*/);
  assert.match(text, /Europe\/Berlin/);
  assert.match(text, /live/);
  assert.match(text, /started/);
  await shot(page, "schedules");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  for (const problem of await page.evaluate(layoutProblems)) assert.fail(`the schedules overview at 390px: ${problem}`);
  await shot(page, "schedules-phone");
  await page.setViewportSize({ width: 1440, height: 900 });
  await Promise.all([page.waitForNavigation(), row.getByRole("link", { name: world.scheduled_name }).click()]);
  assert.match(page.url(), new RegExp("/console/saved-searches/" + world.scheduled + "#schedule$"));
  assert.match(await page.locator("#schedule .card").innerText(), /cron 0 9 \* \* \*/);
  assert.deepEqual(page.problems, [], "no CSP violation or script error");
  await ctx.close();

  const other = await session(world.token_b);
  await other.page.goto(world.base + "/console/schedules");
  assert.match(await other.page.locator("table.schedules tbody").innerText(), /No saved search of your organization has a schedule/);
  await other.ctx.close();
});

test("a form posted without the session's CSRF token is refused", async () => {
  const { ctx, page } = await session(world.token_operator);
  const status = await page.evaluate(async (id) => {
    const r = await fetch("/console/operator/claims/" + id + "/release", {
      method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: "reason=no+csrf&claimed_at=2026-01-01T00:00:00Z", redirect: "manual",
    });
    return r.status;
  }, world.stuck);
  assert.equal(status, 403);
  await ctx.close();
});

test("the API reference at /docs: no script, no token, readable at 390, 1024 and 1440 px", async () => {
  const failures = [];
  for (const width of widths) {
    const ctx = await browser.newContext({ viewport: { width, height: 900 } });
    const page = await ctx.newPage();
    const problems = [];
    page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
    page.on("pageerror", (e) => problems.push(String(e)));
    const resp = await page.goto(world.base + "/docs");
    assert.equal(resp.status(), 200);
    assert.match(resp.headers()["content-security-policy"], /default-src 'none'/);
    assert.equal(await page.locator("script").count(), 0, "no script");
    // Every operation of the table of contents leads to its section.
    const anchors = await page.locator("nav a[href^='#']").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    assert.ok(anchors.length > 40, `${anchors.length} links in the table of contents`);
    for (const href of anchors) assert.equal(await page.locator(href).count(), 1, href);
    for (const problem of await page.evaluate(layoutProblems)) failures.push(`/docs at ${width}px: ${problem}`);
    assert.deepEqual(problems, [], "no CSP violation or script error (the style sheet is admitted by its hash)");
    if (layoutShots) {
      mkdirSync(layoutShots, { recursive: true });
      await page.screenshot({ path: join(layoutShots, `docs-${width}.png`) });
      await page.locator("#startSavedSearch").screenshot({ path: join(layoutShots, `docs-start-${width}.png`) });
    }
    await ctx.close();
  }
  assert.deepEqual(failures, [], "what a reader would miss:\n" + failures.join("\n"));
});
