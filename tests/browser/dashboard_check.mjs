// Opens the ergon dashboard in headless chromium, finds the failed job
// JOB_ID in the failed tab, opens it, clicks Retry and waits until its page
// shows it succeeded, each attempt naming worker WORKER and showing its log
// line; checks the Workers box lists WORKER; pauses the recurring job
// "nightly-report" from the recurring tab; then saves a screenshot.
// Exit 0 on success; page errors fail it.
//   node dashboard_check.mjs URL JOB_ID SCREENSHOT WORKER
import puppeteer from "puppeteer-core";

const [url, jobId, shot, worker] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
let failed = false;
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1440, height: 1000 });
  const errors = [];
  page.on("pageerror", (e) => errors.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
  await page.goto(url, { waitUntil: "networkidle0" });
  const row = `tr[data-id="${jobId}"]`;
  await page.waitForSelector(row, { timeout: 30000 });
  console.log("listed: the failed job is in the failed tab");
  // Locators wait until the element is there and still: the list re-renders
  // and the panel slides in.
  await page.locator(row).click();
  await page.locator("#panel.open #act-retry:not([disabled])").setTimeout(10000).click();
  console.log("clicked retry");
  await page.waitForFunction(
    () => document.querySelector("#panel h3 .pill")?.textContent === "succeeded",
    { timeout: 30000 });
  console.log("ran: the job page shows it succeeded");
  const ranOn = await page.$$eval("#panel tbody tr", (rows) => rows.map((r) => r.cells[4]?.textContent));
  if (ranOn.length !== 2 || !ranOn.every((t) => t.startsWith(worker + " on ")))
    throw new Error("attempts' workers: " + JSON.stringify(ranOn));
  console.log("attempts: both name " + worker);
  const logs = await page.$eval("#job-logs", (el) => el.textContent);
  if ((logs.match(/importing flaky/g) || []).length !== 2)
    throw new Error("the job's logs: " + logs);
  console.log("logs: each try's line is shown");
  const tags = await page.$eval("#job-tags", (el) => el.textContent);
  if (tags !== "tenant=a<b>")
    throw new Error("the job's tags: " + JSON.stringify(tags));
  console.log("tags: shown as text");
  await page.waitForFunction(
    (name) => [...document.querySelectorAll("#worker-list td")].some((td) => td.textContent === name),
    { timeout: 10000 }, worker);
  console.log("workers: the box lists " + worker);
  await page.locator("#close-panel").click();
  // The recurring tab pauses a recurring job; the C++ side checks it stuck.
  await page.locator('button[data-tab="recurring"]').click();
  await page.locator('button[data-recurring="nightly-report"][data-paused="false"]').setTimeout(10000).click();
  await page.waitForSelector('button[data-recurring="nightly-report"][data-paused="true"]', { timeout: 10000 });
  const pausedCell = await page.$eval('button[data-recurring="nightly-report"]', (b) => b.parentElement.textContent);
  if (!pausedCell.includes("until resumed"))
    throw new Error("the recurring job's pause: " + JSON.stringify(pausedCell));
  console.log("recurring: paused from its tab");
  await page.locator('button[data-tab="failed"]').click();
  // Two more refreshes, so the chart has points and the cards are current.
  await new Promise((r) => setTimeout(r, 4500));
  await page.screenshot({ path: shot, fullPage: true });
  if (errors.length) {
    console.error(errors.join("\n"));
    failed = true;
  }
} catch (e) {
  console.error(e.stack || String(e));
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
