// The one way the browser tests launch a browser: Debian's chromium
// (SEARCHD_CHROMIUM or CHROMIUM names another), headless, driven by
// playwright-core, which downloads no browser of its own. --no-sandbox
// because CI runs as root; the rest keeps the browser from calling home
// or using a GPU the machine lacks. The console's tests (test/console),
// the TypeScript client's (clients/ts/browser/drive.mjs, run by
// test/browser) and the web example's (examples/web/test) import it.
export function chromiumOptions(extra = {}) {
  return {
    executablePath: process.env.SEARCHD_CHROMIUM || process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-gpu"],
    ...extra,
  };
}
