// Single sign-on to the console, in a real browser: Debian's chromium,
// driven by playwright-core, signs in through the login page of a real
// OpenID Connect provider (test/oidcprovider, which the Go fixture starts
// with the console registered as its client) and back; the session is in
// the database; signing out leaves the old cookie refused by the console
// and by /v1.
//
//   SEARCHD_BIN, CONSOLE_FIXTURE, SEARCHD_OIDC_PROVIDER  the binaries (make test-console builds them)
//   CHROMIUM     the browser (default /usr/bin/chromium; see ../chromium.mjs)
//   SCREENSHOTS  a directory to write the pages' screenshots to (optional)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { layoutProblems, widths } from "./layout.mjs";
import { requireEnv, shot, startWorld } from "./world.mjs";

requireEnv("SEARCHD_BIN", "CONSOLE_FIXTURE", "SEARCHD_OIDC_PROVIDER");

let world, browser, ask, stop;
before(async () => ({ world, browser, ask, stop } = await startWorld()));
after(() => stop?.());

const desktop = { width: 1440, height: 900 };
const phone = { width: 390, height: 844 };

// open opens a browser context of the viewport and a page that collects
// every CSP violation and script error of the console's pages. (The
// browser's own favicon fetch, which the API answers 404, and the
// provider's pages are not the console's.)
async function open(viewport) {
  const ctx = await browser.newContext({ viewport });
  const page = await ctx.newPage();
  page.problems = [];
  const ours = () => page.url().startsWith(world.base);
  page.on("console", (m) => {
    if (m.type() === "error" && ours() && /Content Security Policy|Refused to/.test(m.text())) page.problems.push(page.url() + ": " + m.text());
  });
  page.on("pageerror", (e) => { if (ours()) page.problems.push(page.url() + ": " + String(e)); });
  return { ctx, page };
}

// signIn signs user in through the provider's login page, from the
// console's front door, and returns once the console's first view shows.
async function signIn(page, user, landing, shotPrefix) {
  await page.goto(world.base + "/console/");
  assert.match(page.url(), /\/console\/sign-in$/, "an unsigned visit lands on the sign-in page");
  if (shotPrefix) await shot(page, shotPrefix + "-sign-in");
  await Promise.all([page.waitForURL((u) => u.href.startsWith(world.issuer + "/login/")), page.click("#provider")]);
  if (shotPrefix) await shot(page, shotPrefix + "-provider-login");
  await page.fill("#username", user.username);
  await page.fill("#password", user.password);
  await Promise.all([
    page.waitForURL((u) => u.href === world.base + landing),
    page.click("button[type=submit]"),
  ]);
  assert.doesNotMatch(page.url(), /code=|state=|eyJ/, "no code, state or token is left in the URL");
}

// sessionCookie returns the console's session cookie of ctx.
async function sessionCookie(ctx) {
  return (await ctx.cookies(world.base + "/console/")).find((c) => c.name === "searchd_console");
}

// v1 calls the API with bearer as the token and returns the status.
async function v1(bearer) {
  const r = await fetch(world.base + "/v1/saved-searches", { headers: { Authorization: "Bearer " + bearer } });
  return r.status;
}

test("a person signs in through the provider's login page, is in the database, and signing out ends it", async () => {
  const { ctx, page } = await open(desktop);
  const who = world.sso_auditor.username;
  assert.equal(await ask("sessions " + who), "0");
  await signIn(page, world.sso_auditor, "/console/saved-searches", "sso");
  await page.getByRole("link", { name: world.search_name }).waitFor();
  assert.equal(await page.getByText(world.search_b_name).count(), 0, "only the person's organization");
  assert.match(await page.locator(".who-actor").innerText(), new RegExp(who.replace(".", "\\.")));
  await shot(page, "sso-signed-in");

  const c = await sessionCookie(ctx);
  assert.ok(c, "a session cookie is set");
  assert.equal(c.httpOnly, true);
  assert.equal(c.sameSite, "Strict");
  assert.equal(c.path, "/console/");
  assert.ok(c.expires > 0 && c.expires - Date.now() / 1000 <= 8 * 3600 + 60, "the cookie ends with the 8 h session");
  assert.equal(await page.evaluate(() => document.cookie), "", "no script can read the session");
  assert.equal((await ctx.cookies(world.base + "/console/oidc/callback")).filter((k) => k.name === "searchd_console_flow").length, 0,
    "the sign-in's flow cookie is spent");
  assert.equal(await ask("sessions " + who), "1|oidc " + world.org_a, "one session, through the provider, of organization A");

  // The session's cookie is no bearer token of the API.
  assert.equal(await v1(c.value), 401);

  // Sign out: the session is deleted, and the old cookie is refused by
  // the console (in a fresh browser holding it) and by /v1.
  await Promise.all([page.waitForURL(/\/console\/sign-in$/), page.getByRole("button", { name: "Sign out" }).click()]);
  assert.equal(await ask("sessions " + who), "0", "signing out deletes the session");
  const replay = await open(desktop);
  await replay.ctx.addCookies([{ name: c.name, value: c.value, url: world.base + "/console/" }]);
  const resp = await replay.page.goto(world.base + "/console/saved-searches");
  assert.match(replay.page.url(), /\/console\/sign-in$/, "the old cookie is sent to sign in");
  assert.equal(resp.status(), 200);
  const post = await fetch(world.base + "/console/sign-out", {
    method: "POST", headers: { Cookie: "searchd_console=" + c.value, "Sec-Fetch-Site": "same-origin",
      "Content-Type": "application/x-www-form-urlencoded" }, body: "csrf=x", redirect: "manual",
  });
  assert.equal(post.status, 401, "a form posted with the old cookie is refused");
  assert.equal(await v1(c.value), 401);
  assert.deepEqual(page.problems, [], "no CSP violation or script error");
  await replay.ctx.close();
  await ctx.close();
});

test("an operator signs in through the provider and lands on the operator views", async () => {
  const { ctx, page } = await open(desktop);
  await signIn(page, world.sso_operator, "/console/operator/claims");
  await page.locator("tr.stuck-row").first().waitFor();
  assert.match(await page.locator(".who").innerText(), /operator/);
  assert.match(await ask("sessions " + world.sso_operator.username), /^1\|oidc -$/, "an operator's session names no organization");
  const resp = await page.goto(world.base + "/console/saved-searches");
  assert.equal(resp.status(), 403, "no organization, no audit view");
  await ctx.close();
});

test("a wrong password stays at the provider, and a callback not of this browser's sign-in makes no session", async () => {
  const { ctx, page } = await open(desktop);
  await page.goto(world.base + "/console/sign-in");
  await Promise.all([page.waitForURL((u) => u.href.startsWith(world.issuer + "/login/")), page.click("#provider")]);
  await page.fill("#username", world.sso_auditor.username);
  await page.fill("#password", "not-the-password");
  await Promise.all([page.waitForLoadState(), page.click("button[type=submit]")]);
  assert.ok(page.url().startsWith(world.issuer), "a wrong password stays at the provider");
  assert.equal(await sessionCookie(ctx), undefined);
  const resp = await page.goto(world.base + "/console/oidc/callback?code=stolen&state=forged");
  assert.equal(resp.status(), 400);
  assert.match(await page.locator(".alert").innerText(), /did not start in this browser/);
  assert.equal(await sessionCookie(ctx), undefined);
  await ctx.close();
});

test("the sign-in page and the first view at a phone's width", async () => {
  const { ctx, page } = await open(phone);
  await signIn(page, world.sso_auditor, "/console/saved-searches", "sso-phone");
  await page.getByRole("link", { name: world.search_name }).waitFor();
  await shot(page, "sso-phone-signed-in");
  await Promise.all([page.waitForURL(/\/console\/sign-in$/), page.getByRole("button", { name: "Sign out" }).click()]);
  await shot(page, "sso-phone-signed-out");
  const signInOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(signInOverflow <= 0, "the sign-in page fits a phone's width: " + signInOverflow + " px too wide");
  await ctx.close();
});

test("the sign-in page with its provider, and a refused callback, at 390, 1024 and 1440 px: nothing cut or off the screen", async () => {
  const failures = [];
  for (const width of widths) {
    const { ctx, page } = await open({ width, height: 900 });
    await page.goto(world.base + "/console/sign-in");
    await page.locator("#provider").waitFor();
    for (const problem of await page.evaluate(layoutProblems)) failures.push(`sign-in at ${width}px: ${problem}`);
    const resp = await page.goto(world.base + "/console/oidc/callback?code=stolen&state=forged");
    assert.equal(resp.status(), 400);
    for (const problem of await page.evaluate(layoutProblems)) failures.push(`refused callback at ${width}px: ${problem}`);
    assert.deepEqual(page.problems, [], "no CSP violation or script error");
    await ctx.close();
  }
  assert.deepEqual(failures, [], "what a reader would miss:\n" + failures.join("\n"));
});
