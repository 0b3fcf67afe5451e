// The chat page (GET /) in a real browser: Debian's headless Chromium driven by
// playwright-core (tests/serve.sh, the "page" part). It loads with no external request,
// sends a message, and sees a streamed reply and the octo figures under it.
//   node page.mjs URL KEY CHROMIUM
import { chromium } from "playwright-core";

const [url, key, executablePath] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage();
  const outside = [];
  page.on("request", (r) => { if (!r.url().startsWith(url)) outside.push(r.url()); });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url + "/");
  if ((await page.title()) !== "octo") throw new Error("not the chat page");
  // the API wants a key: the page asks for it
  await page.waitForSelector("#key", { state: "visible" });
  await page.fill("#key", key);
  await page.dispatchEvent("#key", "change");
  await page.waitForFunction(() => document.getElementById("model").textContent.includes(".gguf"));
  // streamed: every size the reply takes on its way is recorded as the page updates it
  await page.evaluate(() => {
    window.sizes = new Set();
    new MutationObserver(() => {
      const a = document.querySelector(".assistant");
      if (a) window.sizes.add(a.textContent.length);
    }).observe(document.getElementById("log"), { subtree: true, childList: true, characterData: true });
  });
  await page.fill("#input", "Tell me a story.");
  await page.click("#send");
  await page.waitForSelector(".figures", { timeout: 20000 });
  const reply = await page.$eval(".assistant", (e) => e.textContent);
  const figures = await page.$eval(".figures", (e) => e.textContent);
  const sizes = await page.evaluate(() => window.sizes.size);
  const chunks = Number(await page.$eval(".assistant", (e) => e.dataset.chunks || 0));
  if (!reply.length) throw new Error("no reply");
  // the page took the reply in pieces (the screen may show fewer sizes: updates within one read coalesce)
  if (chunks < 2) throw new Error(`the reply came in ${chunks} chunk(s): not streamed`);
  if (!/tokens\/s/.test(figures) || !/KV/.test(figures)) throw new Error(`figures: ${figures}`);
  if (outside.length) throw new Error(`requests outside the server: ${outside}`);
  if (errors.length) throw new Error(`page errors: ${errors}`);
  console.log(`page.mjs: reply of ${reply.length} characters in ${chunks} chunks, shown at ${sizes} sizes; ${figures}`);
} finally {
  await browser.close();
}
