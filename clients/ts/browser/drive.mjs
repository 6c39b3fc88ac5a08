// Drives the page of the browser test in Debian's headless Chromium with
// playwright-core (which downloads no browser of its own): node drive.mjs
// <page URL> <screenshot.png>. Prints the page's result as JSON on stdout;
// exits non-zero when the page did not finish.
import { chromium } from "playwright-core";
import { chromiumOptions } from "../../../test/chromium.mjs";

const [pageURL, screenshot] = process.argv.slice(2);
if (!pageURL || !screenshot) {
  console.error("usage: node drive.mjs <page URL> <screenshot.png>");
  process.exit(2);
}
const browser = await chromium.launch(chromiumOptions({ timeout: 60_000 }));
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 520 } });
  const console_ = [];
  page.on("console", (m) => console_.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => console_.push(`pageerror: ${e.message}`));
  await page.goto(pageURL);
  await page.waitForFunction(() => window.__result && window.__result.done, null, { timeout: 60_000 });
  const result = await page.evaluate(() => window.__result);
  result.console = console_;
  result.userAgent = await page.evaluate(() => navigator.userAgent);
  await page.screenshot({ path: screenshot, fullPage: true });
  process.stdout.write(JSON.stringify(result) + "\n");
} finally {
  await browser.close();
}
