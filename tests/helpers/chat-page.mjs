// Driving the chat page (web/) in a browser tab: open an agent instance, send a message, find
// an assistant text. Shared by tests/browser.test.mjs and tests/chat-page.test.mjs.
import { openPage } from "./browser.mjs";

/** Opens the page of instance `name` served by `worker`, waits until it is connected, and
 * records the page in `pages` (closed by the test file's afterEach). */
export async function openChat(browser, worker, pages, name, viewport) {
  const page = await openPage(browser, new URL(`/?name=${encodeURIComponent(name)}`, worker.url).href);
  if (viewport) await page.setViewportSize(viewport);
  pages.push(page);
  await page.locator("[data-testid=connection].on").waitFor();
  return page;
}

/** Types `text` into the composer, sends it and waits for the user bubble. */
export async function send(page, text) {
  await page.locator(".composer textarea").fill(text);
  await page.locator("button.send").click();
  await page.locator(".msg-user", { hasText: text }).waitFor();
}

// Continuation replies stream at a model's pace (a few hundred ms), so the tab that answered has
// ACKed the continuation before it ends. A continuation that finishes before the ACK reaches that
// tab as a replay after the final transcript, which useAgentChat cannot merge (so with Think too).
export const slow = (text) => ({ text, chunkSize: 6, delayMs: 30 });

/** The assistant text containing `text`. */
export const assistant = (page, text) => page.locator(".msg-assistant .text", { hasText: text });
