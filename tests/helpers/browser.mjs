// Headless Debian chromium driven by playwright-core, which is told where chromium is and so
// never downloads a browser. Playwright owns the process (and its temp profile) and ends it on
// `close()`.
import { chromium } from "playwright-core";
import fs from "node:fs";

export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

// Flags for a machine whose only network is loopback: no background fetches, no QUIC probes.
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export async function launchBrowser() {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} not found: run scripts/setup.sh (it installs Debian's chromium)`);
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, chromiumSandbox: false, args: ARGS, timeout: 15000 });
}

/**
 * Opens a page in a fresh context (Europe/Berlin time zone, so the browser tool's answer is
 * known) and records uncaught page errors in `page.errors`. `setup(page)` runs before the page
 * loads (e.g. to route its WebSockets).
 */
export async function openPage(browser, url, { timezoneId = "Europe/Berlin", setup } = {}) {
  const context = await browser.newContext({ timezoneId, viewport: { width: 960, height: 760 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10000);
  page.errors = [];
  page.on("pageerror", (e) => page.errors.push(e));
  await setup?.(page);
  await page.goto(url);
  return page;
}
