// Drives code-server in headless chromium: opens train.py, waits for fixdev's
// diagnostics (FDV101 like-factory, FDV104 cuda-call) in the Problems panel,
// applies FDV101's quick fix by hand (an unsafe fix: only by hand), saves
// with fix-on-save on (which applies the safe FDV104 fix), and reads the file
// on disk. Exits non-zero, with a screenshot in .run/, on any failure.
const fs = require("fs");
const path = require("path");
const { chromium } = require("playwright-core");

const [url, run] = process.argv.slice(2);
const file = path.join(run, "workspace", "train.py");

async function main() {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  try {
    await page.goto(url);
    await page.waitForSelector(".monaco-workbench", { timeout: 60000 });
    await page.waitForTimeout(3000); // the workbench's first layout
    await page.locator(".explorer-folders-view").getByText("train.py").click(); // opens it
    await page.waitForSelector(".monaco-editor .view-lines", { timeout: 30000 });

    // The diagnostics, with their codes, in the Problems panel.
    await page.keyboard.press("Control+Shift+M");
    const problems = page.locator(".markers-panel");
    await problems.getByText("FDV104").first().waitFor({ timeout: 90000 });
    await problems.getByText("FDV101").first().waitFor({ timeout: 10000 });
    const listed = await problems.innerText();
    console.log("Problems panel:\n" + listed);
    await page.screenshot({ path: path.join(run, "diagnostics.png") });

    // FDV101's quick fix, picked by hand from the light bulb menu.
    await problems.getByText(/torch\.ones|like/i).first().click(); // moves the cursor to it
    await page.waitForTimeout(500);
    await page.locator(".monaco-editor textarea").first().focus();
    await page.keyboard.press("Control+.");
    const fix = page.locator(".action-widget").getByText(/\(FDV101\)/).first();
    await fix.waitFor({ timeout: 20000 });
    console.log("Quick fix offered: " + (await fix.innerText()));
    // The menu takes keys (a pointer block lies over it): down to the fix, Enter.
    for (let step = 0; step < 10; step++) {
      const focused = await page.locator(".action-widget .monaco-list-row.focused").innerText().catch(() => "");
      if (/ones_like.*\(FDV101\)/.test(focused)) break;
      await page.keyboard.press("ArrowDown");
    }
    await page.keyboard.press("Enter");
    await page.waitForTimeout(1000);

    // Save: fix-on-save applies the fix-all (the safe fixes only).
    await page.keyboard.press("Control+S");
    const deadline = Date.now() + 30000;
    let text = "";
    while (Date.now() < deadline) {
      text = fs.readFileSync(file, "utf8");
      if (text.includes("x.to(device)")) break;
      await page.waitForTimeout(500);
    }
    console.log("train.py on disk after the save:\n" + text);
    const expected = ["torch.ones_like(x)", "y = x.to(device)", "device = torch.device("];
    const absent = expected.filter((part) => !text.includes(part));
    if (absent.length || text.includes(".cuda()") || text.includes("torch.ones(x.shape)")) {
      throw new Error(`the saved file lacks ${JSON.stringify(absent)} or keeps a bug`);
    }
    await page.keyboard.press("Control+Shift+M");
    await page.waitForTimeout(3000);
    const after = await problems.innerText().catch(() => "");
    if (/FDV10[14]/.test(after)) throw new Error("diagnostics remain after the fixes: " + after);
    console.log("PASS");
  } catch (error) {
    await page.screenshot({ path: path.join(run, "failure.png") }).catch(() => {});
    throw error;
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error("FAIL:", error);
  process.exit(1);
});
