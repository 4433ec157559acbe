// Keeps the dashboard open for SECONDS, so its charts collect samples, then
// saves a screenshot. Run by tools/dashboard-screenshot from the folder
// where the tests installed puppeteer-core.
//   node dashboard_screenshot.mjs URL SECONDS OUT
import puppeteer from "puppeteer-core";

const [url, seconds, out] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1440, height: 1000 });
  await page.goto(url, { waitUntil: "networkidle0" });
  await new Promise((r) => setTimeout(r, Number(seconds) * 1000));
  await page.screenshot({ path: out, fullPage: true });
} finally {
  await browser.close();
}
