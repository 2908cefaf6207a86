// Drives code-server in headless chromium, in two parts.
// The script: opens train.py, waits for fixdev's diagnostics (FDV101
// like-factory, FDV104 cuda-call) in the Problems panel, applies FDV101's
// quick fix by hand (an unsafe fix: only by hand), saves with fix-on-save on
// (which applies the safe FDV104 fix), and reads the file on disk.
// The notebook: opens train.ipynb (VS Code's built-in ipynb serializer, no
// Jupyter extension, no kernel), waits for FDV104 and FDV102 on its cells,
// saves with notebook.source.fixAll.fixdev on save, and reads the .ipynb on
// disk: valid JSON, each change once (the cells `fixdev --apply` writes), the
// cells no fix touches byte for byte as they were.
// Exits non-zero, with a screenshot in .run/, on any failure.
const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");
const { chromium } = require("playwright-core");

const [url, run, python] = process.argv.slice(2);
const file = path.join(run, "workspace", "train.py");
const began = Date.now();
/** A step's line, with the seconds since the test began. */
const step = (what) => console.log(`[${((Date.now() - began) / 1000).toFixed(1)} s] ${what}`);

/** The Problems panel, opened (Control+Shift+M toggles it: pressed only
 * when it is not shown). */
async function problemsPanel(page) {
  const problems = page.locator(".markers-panel");
  if (!(await problems.isVisible())) {
    await page.keyboard.press("Control+Shift+M");
    await problems.waitFor({ state: "visible", timeout: 10000 });
  }
  return problems;
}

/** Waits until the Problems panel lists none of the codes `pattern` matches. */
async function cleared(page, pattern, what) {
  const problems = await problemsPanel(page);
  const deadline = Date.now() + 15000;
  let listed = "";
  while (Date.now() < deadline) {
    listed = await problems.innerText();
    if (!pattern.test(listed)) return;
    await page.waitForTimeout(500);
  }
  throw new Error(`diagnostics remain ${what}: ${listed}`);
}

async function script(page) {
  await page.locator(".explorer-folders-view").getByText("train.py").click(); // opens it
  await page.waitForSelector(".monaco-editor .view-lines", { timeout: 30000 });

  // The diagnostics, with their codes, in the Problems panel.
  const problems = await problemsPanel(page);
  await problems.getByText("FDV104").first().waitFor({ timeout: 90000 });
  await problems.getByText("FDV101").first().waitFor({ timeout: 10000 });
  const listed = await problems.innerText();
  step("train.py's diagnostics listed");
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
  step("FDV101's quick fix applied; saving");
  await page.keyboard.press("Control+S");
  const deadline = Date.now() + 30000;
  let text = "";
  while (Date.now() < deadline) {
    text = fs.readFileSync(file, "utf8");
    if (text.includes("x.to(device)")) break;
    await page.waitForTimeout(500);
  }
  step("train.py saved");
  console.log("train.py on disk after the save:\n" + text);
  const expected = ["torch.ones_like(x)", "y = x.to(device)", "device = torch.device("];
  const absent = expected.filter((part) => !text.includes(part));
  if (absent.length || text.includes(".cuda()") || text.includes("torch.ones(x.shape)")) {
    throw new Error(`the saved file lacks ${JSON.stringify(absent)} or keeps a bug`);
  }
  await cleared(page, /FDV10[14]/, "after the fixes");
}

/** The lines of each cell in the notebook's JSON text (indent 1, as Jupyter
 * writes it: a cell opens with "  {" and closes with "  }"), the comma
 * between cells left out. */
function cellTexts(text) {
  const cells = [];
  let current = null;
  for (const line of text.split("\n")) {
    if (line === "  {") current = [];
    if (current) current.push(line);
    if (current && /^  },?$/.test(line)) {
      current[current.length - 1] = "  }";
      cells.push(current.join("\n"));
      current = null;
    }
  }
  return cells;
}

const sourceOf = (cell) => (Array.isArray(cell.source) ? cell.source.join("") : cell.source);

async function notebookPart(page, name) {
  const notebook = path.join(run, "workspace", name);
  const original = fs.readFileSync(path.join(__dirname, "workspace", name), "utf8");
  // What `fixdev --apply` writes for the notebook: the cells a save must give.
  const oracle = path.join(run, "oracle");
  fs.mkdirSync(oracle, { recursive: true });
  fs.writeFileSync(path.join(oracle, name), original);
  execFileSync(python, ["-m", "fixdev", "--apply", path.join(oracle, name)], { stdio: "ignore" });
  const applied = fs.readFileSync(path.join(oracle, name), "utf8");
  const wanted = JSON.parse(applied).cells.map(sourceOf);
  const before = JSON.parse(original).cells.map(sourceOf);
  const changed = wanted.map((source, i) => source !== before[i]);
  console.log(`fixdev --apply changes cells ${changed.flatMap((c, i) => (c ? [i + 1] : [])).join(", ")} of ${before.length}`);

  step(`opening ${name}`);
  await page.locator(".explorer-folders-view").getByText(name).click();
  // The notebook editor shown (another notebook's may stay in the page, hidden).
  const editor = page.locator(".notebook-editor").filter({ visible: true });
  await editor.locator(".cell-editor-container .monaco-editor").first().waitFor({ timeout: 60000 });
  const problems = await problemsPanel(page);
  await problems.getByText("FDV102").first().waitFor({ timeout: 90000 });
  await problems.getByText("FDV104").first().waitFor({ timeout: 10000 });
  step(`${name}'s diagnostics listed`);
  console.log(`Problems panel with ${name} open:\n` + (await problems.innerText()));
  // The squiggles in the cells' editors (the page tall enough to show every
  // cell: the notebook renders only the cells in view).
  const squiggled = editor.locator(".cell-editor-container").filter({ has: page.locator(".squiggly-warning") });
  let marked = [];
  for (let tries = 0; tries < 20 && marked.length < 2; tries++) {
    if (tries) await page.waitForTimeout(500);
    marked = await squiggled.locator(".view-lines").allInnerTexts();
  }
  marked = marked.map((text) => text.replace(/\s+/g, " ").trim());
  console.log(`Squiggles in ${marked.length} cells: ${marked.map((t) => JSON.stringify(t)).join(", ")}`);
  if (marked.length !== 2) throw new Error(`expected squiggles in two cells, saw ${marked.length}`);
  await page.screenshot({ path: path.join(run, name.replace(".ipynb", "-diagnostics.png")) });

  // Save the notebook (focus in its first cell): notebook.codeActionsOnSave
  // asks for notebook.source.fixAll.fixdev once, for the notebook.
  await editor.locator(".cell-editor-container .monaco-editor").first().click();
  await page.keyboard.press("Escape"); // the cell selected, not in edit mode
  step("saving the notebook");
  await page.keyboard.press("Control+S");
  const deadline = Date.now() + 30000;
  let text = original;
  while (Date.now() < deadline && text === original) {
    text = fs.readFileSync(notebook, "utf8");
    await page.waitForTimeout(500);
  }
  step(text === original ? `${name} on disk unchanged after 30 s` : `${name} on disk changed`);
  await page.waitForTimeout(3000); // a second application, if any, would come now
  text = fs.readFileSync(notebook, "utf8");
  console.log(`${name} on disk after the save:\n` + text);

  let saved;
  try {
    saved = JSON.parse(text);
  } catch (error) {
    throw new Error("the saved notebook is not valid JSON: " + error.message);
  }
  if (saved.nbformat !== 4 || saved.cells.length !== before.length) {
    throw new Error(`the saved notebook has nbformat ${saved.nbformat} and ${saved.cells.length} cells`);
  }
  const got = saved.cells.map(sourceOf);
  got.forEach((source, i) => {
    if (source !== wanted[i]) {
      throw new Error(`cell ${i + 1} is ${JSON.stringify(source)}, fixdev --apply writes ${JSON.stringify(wanted[i])}`);
    }
  });
  // Each change once (an edit applied twice would show twice).
  for (const [part, times] of [["device = torch.device(", 1], [".to(device)", 1], ["device=next(model.parameters()).device", 1], [".cuda()", 0]]) {
    const seen = got.join("\n").split(part).length - 1;
    if (seen !== times) throw new Error(`${JSON.stringify(part)} appears ${seen} times in the saved cells, not ${times}`);
  }
  const was = cellTexts(original);
  const now = cellTexts(text);
  if (was.length !== before.length || now.length !== before.length) {
    throw new Error(`cell blocks: ${was.length} before, ${now.length} after`);
  }
  const untouched = changed.flatMap((c, i) => (c ? [] : [i]));
  for (const i of untouched) {
    if (now[i] !== was[i]) throw new Error(`cell ${i + 1}, which no fix touches, changed:\n${was[i]}\n---\n${now[i]}`);
  }
  console.log(`Cells ${untouched.map((i) => i + 1).join(", ")} byte-identical; the saved file ${text === applied ? "equals" : "differs from"} fixdev --apply's`);

  await cleared(page, /FDV10[24]/, `in ${name} after the save`);
  step(`${name}'s diagnostics cleared`);
}

async function main() {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  try {
    await page.goto(url);
    await page.waitForSelector(".monaco-workbench", { timeout: 60000 });
    await page.waitForTimeout(3000); // the workbench's first layout
    step("workbench shown");
    await script(page);
    console.log("PASS: the script");
    // A notebook that opens with a code cell: VS Code asks the notebook's
    // code actions on save of the first cell only (microsoft/vscode#216653).
    await page.setViewportSize({ width: 1400, height: 1300 });
    await notebookPart(page, "train.ipynb");
    console.log("PASS: train.ipynb");
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
