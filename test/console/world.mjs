// What the browser tests (console.test.mjs, sso.test.mjs) share: the Go
// fixture next to this file, which starts a real searchd serve on a
// throwaway PostgreSQL and seeds it, and one chromium to drive it.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { chromiumOptions } from "../chromium.mjs";

// shots is the directory the pages' screenshots go to ("" for none).
export const shots = process.env.SCREENSHOTS || "";

// requireEnv throws, naming them, unless every variable of names is set.
export function requireEnv(...names) {
  if (names.every((n) => process.env[n])) return;
  const list = names.length > 1 ? names.slice(0, -1).join(", ") + " and " + names.at(-1) : names[0];
  throw new Error(`set ${list} (make test-console does)`);
}

// startWorld starts the fixture (CONSOLE_FIXTURE, given SEARCHD_BIN) and
// the browser. It resolves to world, the fixture's first line (the base
// URL, tokens and seeded ids); browser; ask, which asks the fixture a
// question about the database and resolves to its answer line; and stop,
// which closes the browser and waits for the fixture to exit. It rejects
// if the fixture exits before its first line.
export async function startWorld() {
  const fixture = spawn(process.env.CONSOLE_FIXTURE, ["-searchd", process.env.SEARCHD_BIN], { stdio: ["pipe", "pipe", "inherit"] });
  const answers = [];
  const lines = createInterface({ input: fixture.stdout });
  const world = await new Promise((resolve, reject) => {
    fixture.once("exit", (code) => reject(new Error("fixture exited " + code)));
    lines.once("line", (l) => resolve(JSON.parse(l)));
  });
  lines.on("line", (l) => answers.shift()?.(l));
  const ask = (question) => new Promise((resolve) => {
    answers.push(resolve);
    fixture.stdin.write(question + "\n");
  });
  let browser;
  const stop = async () => {
    await browser?.close();
    fixture.stdin.end();
    if (fixture.exitCode === null && fixture.signalCode === null) await new Promise((r) => fixture.once("exit", r));
  };
  try {
    browser = await chromium.launch(chromiumOptions());
  } catch (err) {
    await stop();
    throw err;
  }
  if (shots) mkdirSync(shots, { recursive: true });
  return { world, browser, ask, stop };
}

// shot writes page's full-page screenshot as name.png when shots is set.
export async function shot(page, name) {
  if (shots) await page.screenshot({ path: join(shots, name + ".png"), fullPage: true });
}
