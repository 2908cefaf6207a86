// fixdev for VS Code: starts `fixdev --lsp` and hands VS Code to it. The
// diagnostics, quick fixes and the fix-all kinds (source.fixAll.fixdev,
// notebook.source.fixAll.fixdev) are the server's; this file finds the server,
// passes the settings and runs the "Fix all device bugs" command.
import { execFile } from "child_process";
import * as vscode from "vscode";
import {
  CodeAction,
  CodeActionRequest,
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
} from "vscode-languageclient/node";

const FIX_ALL = "source.fixAll.fixdev";
const NOTEBOOK_FIX_ALL = "notebook.source.fixAll.fixdev";
// The settings the server reads; the others (path, interpreter) choose the
// server and restart it.
const SERVER_SETTINGS = ["select", "ignore", "unsafeFixes", "configurationPreference"];

let client: LanguageClient | undefined;
let output: vscode.OutputChannel;

/** What `initializationOptions` and `workspace/didChangeConfiguration` carry. */
export function serverSettings(config: vscode.WorkspaceConfiguration): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const key of SERVER_SETTINGS) {
    settings[key] = config.get(key) ?? null;
  }
  return settings;
}

interface PythonApi {
  environments: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment(path: { path: string } | string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

/** The Python extension's API, as Ruff's and Black's extensions use it; undefined without it. */
async function pythonApi(): Promise<PythonApi | undefined> {
  const extension = vscode.extensions.getExtension("ms-python.python");
  if (!extension) {
    return undefined;
  }
  try {
    const api = (await extension.activate()) as PythonApi;
    return api?.environments ? api : undefined;
  } catch (error) {
    output.appendLine(`The Python extension did not activate: ${error}`);
    return undefined;
  }
}

/** The selected environment's interpreter, else fixdev.interpreter, else python3. */
async function interpreter(api: PythonApi | undefined): Promise<string> {
  if (api) {
    const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
    const environment = await api.environments.resolveEnvironment(api.environments.getActiveEnvironmentPath(resource));
    const executable = environment?.executable.uri?.fsPath;
    if (executable) {
      return executable;
    }
  }
  return vscode.workspace.getConfiguration("fixdev").get<string>("interpreter") || "python3";
}

interface Run {
  code: number | string | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(command, args, { timeout: 30000 }, (error, stdout, stderr) => {
      const code = error ? ((error as NodeJS.ErrnoException).code ?? (error as { code?: number }).code ?? 1) : 0;
      resolve({ code: code as number | string, stdout, stderr });
    });
    child.stdin?.end(); // `--lsp` reads stdin: at its end the server stops
  });
}

// Exit codes of the interpreter check: 3, no fixdev; 4, fixdev without pygls.
const CHECK = [
  "import importlib.util, sys",
  "if importlib.util.find_spec('fixdev') is None: sys.exit(3)",
  "if importlib.util.find_spec('pygls') is None: sys.exit(4)",
].join("\n");

/** Why the server cannot start, in words for the user; undefined when it can. */
export async function missing(command: string, args: string[], python: boolean): Promise<string | undefined> {
  const install = python ? `${command} -m pip install "fixdev[lsp]"` : 'pip install "fixdev[lsp]" into the environment that holds it';
  if (python) {
    const checked = await run(command, ["-c", CHECK]);
    if (checked.code === "ENOENT") {
      return `fixdev: no Python interpreter at "${command}". Select an environment (Python: Select Interpreter) or set fixdev.interpreter or fixdev.path.`;
    }
    if (checked.code === 3) {
      return `fixdev is not installed in ${command}. Install it there: ${install}`;
    }
    if (checked.code === 4) {
      return `fixdev's language server needs its lsp extra (pygls), missing in ${command}: ${install}`;
    }
    if (checked.code !== 0) {
      return `fixdev: ${command} failed (${checked.code}): ${checked.stderr.trim()}`;
    }
    return undefined;
  }
  // An executable: `--lsp` with stdin closed starts and stops at once, or
  // says what it lacks (the CLI's message names pygls).
  const tried = await run(command, args);
  if (tried.code === "ENOENT") {
    return `fixdev: fixdev.path "${command}" does not exist. Set it to a fixdev executable, or clear it to use the selected Python environment.`;
  }
  if (/pygls/.test(tried.stderr)) {
    return `fixdev's language server needs its lsp extra (pygls): ${install}`;
  }
  return undefined;
}

async function serverCommand(api: PythonApi | undefined): Promise<{ command: string; args: string[]; python: boolean }> {
  const path = vscode.workspace.getConfiguration("fixdev").get<string>("path");
  if (path) {
    return { command: path, args: ["--lsp"], python: false };
  }
  return { command: await interpreter(api), args: ["-m", "fixdev", "--lsp"], python: true };
}

async function start(context: vscode.ExtensionContext, api: PythonApi | undefined): Promise<void> {
  const { command, args, python } = await serverCommand(api);
  output.appendLine(`Starting ${command} ${args.join(" ")}`);
  const problem = await missing(command, args, python);
  if (problem) {
    output.appendLine(problem);
    void vscode.window.showErrorMessage(problem, "Open Settings").then((choice) => {
      if (choice) {
        void vscode.commands.executeCommand("workbench.action.openSettings", "fixdev.");
      }
    });
    return;
  }
  const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const serverOptions: ServerOptions = { command, args, options: { cwd } };
  const clientOptions: LanguageClientOptions = {
    // Notebook cells come through the server's notebook document sync; the
    // cell schemes are listed so the providers (quick fixes, fix-all) serve
    // cells too, as in Ruff's extension.
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
      { scheme: "vscode-notebook", language: "python" },
      { scheme: "vscode-notebook-cell", language: "python" },
    ],
    initializationOptions: serverSettings(vscode.workspace.getConfiguration("fixdev")),
    outputChannel: output,
  };
  client = new LanguageClient("fixdev", "fixdev", serverOptions, clientOptions);
  await client.start();
}

async function stop(): Promise<void> {
  const running = client;
  client = undefined;
  if (running) {
    await running.stop();
  }
}

/** The fix-all action's edit for the active editor, applied: a notebook's
 * edit covers all its cells, whichever cell is asked. */
async function fixAll(): Promise<void> {
  if (!client) {
    void vscode.window.showErrorMessage("fixdev: the language server is not running (see the fixdev output).");
    return;
  }
  const notebook = vscode.window.activeNotebookEditor?.notebook;
  let document = vscode.window.activeTextEditor?.document;
  let kind = FIX_ALL;
  if (notebook && (!document || document.uri.scheme === "vscode-notebook-cell")) {
    document = notebook.getCells().find((cell) => cell.kind === vscode.NotebookCellKind.Code)?.document;
    kind = NOTEBOOK_FIX_ALL;
  }
  if (!document) {
    void vscode.window.showInformationMessage("fixdev: open a Python file or notebook first.");
    return;
  }
  const start = { line: 0, character: 0 };
  const actions = await client.sendRequest(CodeActionRequest.type, {
    textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri) },
    range: { start, end: start },
    context: { diagnostics: [], only: [kind] },
  });
  const action = (actions ?? []).find((a): a is CodeAction => "kind" in a && a.kind === kind && a.edit !== undefined);
  if (!action?.edit) {
    void vscode.window.showInformationMessage("fixdev: no device bugs to fix.");
    return;
  }
  await vscode.workspace.applyEdit(await client.protocol2CodeConverter.asWorkspaceEdit(action.edit));
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("fixdev");
  const api = await pythonApi();
  const restart = async () => {
    await stop();
    await start(context, api);
  };
  context.subscriptions.push(
    output,
    vscode.commands.registerCommand("fixdev.fixAll", fixAll),
    vscode.commands.registerCommand("fixdev.restart", restart),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (event.affectsConfiguration("fixdev.path") || event.affectsConfiguration("fixdev.interpreter")) {
        await restart();
      } else if (client && SERVER_SETTINGS.some((key) => event.affectsConfiguration(`fixdev.${key}`))) {
        // The section by name, as a push client sends it; the server
        // re-publishes the open documents under the new settings.
        await client.sendNotification(DidChangeConfigurationNotification.type, {
          settings: { fixdev: serverSettings(vscode.workspace.getConfiguration("fixdev")) },
        });
      }
    }),
  );
  if (api) {
    // Another environment selected: its interpreter, its fixdev.
    context.subscriptions.push(api.environments.onDidChangeActiveEnvironmentPath(() => restart()));
  }
  await start(context, api);
}

export async function deactivate(): Promise<void> {
  await stop();
}
