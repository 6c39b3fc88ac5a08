// Browser tests of the console's admin pages: an organization's admin
// manages its webhook endpoints and service keys, at a desktop's width and
// a phone's. Same environment as console.test.mjs (SEARCHD_BIN,
// CONSOLE_FIXTURE, CHROMIUM, SCREENSHOTS); LAYOUT_SHOTS, when set, is a
// directory for a screenshot of every step at every width.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { layoutProblems } from "./layout.mjs";
import { requireEnv, shot, startWorld } from "./world.mjs";

requireEnv("SEARCHD_BIN", "CONSOLE_FIXTURE");

let world, browser, stop;
before(async () => ({ world, browser, stop } = await startWorld()));
after(() => stop?.());

const layoutShots = process.env.LAYOUT_SHOTS || "";
if (layoutShots) mkdirSync(layoutShots, { recursive: true });

// session opens a browser context signed in with token, width px wide,
// collecting every CSP violation or page error.
async function session(token, width) {
  const ctx = await browser.newContext({ viewport: { width, height: 900 } });
  const page = await ctx.newPage();
  page.problems = [];
  page.on("console", (m) => { if (m.type() === "error") page.problems.push(m.text() + " (" + page.url() + ")"); });
  page.on("pageerror", (e) => page.problems.push(String(e)));
  await page.goto(world.base + "/console/sign-in");
  await page.fill("#token", token);
  await Promise.all([page.waitForNavigation(), page.click("#token-sign-in")]);
  return { ctx, page };
}

// submit clicks the button and resolves to the answer of the navigation
// it makes.
async function submit(page, button) {
  const [resp] = await Promise.all([page.waitForNavigation(), button.click()]);
  return resp;
}

// look records what a reader at this width would miss, and the step's
// screenshot when LAYOUT_SHOTS is set.
async function look(page, failures, name) {
  for (const p of await page.evaluate(layoutProblems)) failures.push(`${name}: ${p}`);
  if (layoutShots) await page.screenshot({ path: join(layoutShots, name + ".png"), fullPage: true });
}

for (const width of [1440, 390]) {
  test(`an admin creates a webhook endpoint, sees its secret once, disables and deletes it, at ${width} px`, async () => {
    const { ctx, page } = await session(world.token_admin_a, width);
    const failures = [];
    await page.goto(world.base + "/console/webhooks");
    const url = `https://hooks.example.com/searchd-${width}`;
    await page.fill("#create-endpoint input[name=url]", url);
    await page.fill("#create-endpoint input[name=description]", "product UI");
    await page.check("#create-endpoint input[value='run.succeeded']");
    await page.check("#create-endpoint input[value='run.failed']");
    const created = await submit(page, page.locator("#create-endpoint button[type=submit]"));
    assert.equal(created.status(), 201);
    assert.equal(created.headers()["cache-control"], "no-store", "the secret is not kept by the browser");
    const secret = await page.locator("#new-secret").innerText();
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    await look(page, failures, `webhooks-created-${width}`);
    if (width === 1440) await shot(page, "webhooks");

    // Shown once: the page read again lists the endpoint, not its secret.
    await page.goto(world.base + "/console/webhooks");
    assert.equal(await page.getByText("whsec_").count(), 0, "the secret is shown once");
    const endpoint = page.locator("section.endpoint", { has: page.locator("h2", { hasText: url }) });
    assert.match(await endpoint.innerText(), /enabled[\s\S]*product UI[\s\S]*run\.failed, run\.succeeded[\s\S]*by admin-ada/);

    await submit(page, endpoint.getByRole("button", { name: "Disable" }));
    assert.match(await page.locator("[role=status]").innerText(), /the endpoint is disabled/);
    assert.match(await endpoint.innerText(), /disabled: disabled by admin-ada/);
    await look(page, failures, `webhooks-disabled-${width}`);
    if (width === 390) await shot(page, "webhooks-phone");

    // Delete needs its box ticked: without it the browser does not send
    // the form (and the server would refuse it).
    const del = endpoint.getByRole("button", { name: "Delete" });
    await del.click();
    assert.equal(await endpoint.locator("input[name=confirm]").evaluate((el) => el.validity.valueMissing), true,
      "the browser refuses to send the delete form until its box is ticked");
    assert.equal(await endpoint.count(), 1, "nothing deleted without the box ticked");
    await endpoint.locator("input[name=confirm]").check();
    await submit(page, del);
    assert.match(await page.locator("[role=status]").innerText(), /the endpoint is deleted/);
    assert.equal(await endpoint.count(), 0, "the endpoint is gone");

    assert.deepEqual(page.problems, [], "no CSP violation or script error");
    assert.deepEqual(failures, [], "what a reader would miss:\n" + failures.join("\n"));
    await ctx.close();
  });

  test(`an admin creates and revokes a service key, at ${width} px`, async () => {
    const { ctx, page } = await session(world.token_admin_a, width);
    const failures = [];
    await page.goto(world.base + "/console/service-keys");
    const name = `runtime eu-${width}`;
    await page.fill("input[name=name]", name);
    await page.check("input[name=scope][value='runs:report']");
    const created = await submit(page, page.getByRole("button", { name: "Create" }));
    assert.equal(created.status(), 201);
    assert.equal(created.headers()["cache-control"], "no-store");
    assert.match(await page.locator("#new-key code").innerText(), /^sdk_[0-9a-f]{32}_/);
    await look(page, failures, `service-keys-created-${width}`);

    const row = page.locator("table.list tbody tr", { hasText: name });
    await submit(page, row.getByRole("button", { name: "Revoke" }));
    assert.match(await page.locator("[role=status]").innerText(), /the key is revoked/);
    assert.match(await row.innerText(), /by admin-ada/);
    assert.equal(await row.getByRole("button", { name: "Revoke" }).count(), 0);
    await look(page, failures, `service-keys-revoked-${width}`);

    assert.deepEqual(page.problems, [], "no CSP violation or script error");
    assert.deepEqual(failures, [], "what a reader would miss:\n" + failures.join("\n"));
    await ctx.close();
  });
}

test("a member reads the Webhooks page without any form", async () => {
  const { ctx, page } = await session(world.token_a, 1440);
  const resp = await page.goto(world.base + "/console/webhooks");
  assert.equal(resp.status(), 200);
  assert.equal(await page.locator("main form").count(), 0, "no create, disable or delete form");
  const status = await page.evaluate(async () => {
    const csrf = document.querySelector("input[name=csrf]").value;
    const r = await fetch("/console/webhooks", { method: "POST", redirect: "manual",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ csrf, url: "https://hooks.example.com/member" }) });
    return r.status;
  });
  assert.equal(status, 403);
  await ctx.close();
});
