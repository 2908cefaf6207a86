#!/bin/sh
# The end-to-end test in a real VS Code (code-server on 127.0.0.1), driven by
# Playwright with apt's chromium. Not part of the default suite: run
#   editors/vscode/e2e/setup.sh   (once)
#   editors/vscode/e2e/run.sh [PYTHON]
# PYTHON: an interpreter with fixdev[lsp] (default: the repository's .venv).
set -eu
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
PYTHON="${1:-$REPO/.venv/bin/python}"
RUN="$HERE/.run"
rm -rf "$RUN" && mkdir -p "$RUN"
BEGAN=$(date +%s)
took() { echo "run.sh: $1 ($(($(date +%s) - BEGAN)) s)"; }
(cd "$HERE/.." && sh scripts/package.sh >"$RUN/package.log" 2>&1) || { cat "$RUN/package.log"; exit 1; }
VSIX="$(ls "$HERE"/../fixdev-*.vsix)"
took "packaged $(basename "$VSIX")"
CS="$HERE/.tools/node_modules/.bin/code-server"
"$CS" --user-data-dir "$RUN/user" --extensions-dir "$RUN/ext" --install-extension "$VSIX"
# A copy of the workspace: the test edits and saves its files.
cp -r "$HERE/workspace" "$RUN/workspace"
cat >"$RUN/workspace/.vscode/settings.json" <<JSON
{
  "fixdev.interpreter": "$PYTHON",
  "editor.codeActionsOnSave": { "source.fixAll.fixdev": "explicit" },
  "notebook.codeActionsOnSave": { "notebook.source.fixAll.fixdev": "explicit" },
  "files.autoSave": "off"
}
JSON
# Application settings, read from the user's settings only: no trust prompt,
# no welcome page over the editor.
mkdir -p "$RUN/user/User"
cat >"$RUN/user/User/settings.json" <<JSON
{ "security.workspace.trust.enabled": false, "workbench.startupEditor": "none", "workbench.tips.enabled": false, "git.openRepositoryInParentFolders": "never" }
JSON
PORT="${PORT:-18080}"
"$CS" --auth none --bind-addr "127.0.0.1:$PORT" --disable-telemetry --disable-update-check \
  --user-data-dir "$RUN/user" --extensions-dir "$RUN/ext" >"$RUN/code-server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER' EXIT
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 1; done
took "installed, code-server up on 127.0.0.1:$PORT"
NODE_PATH="$HERE/.tools/node_modules" node "$HERE/test.js" "http://127.0.0.1:$PORT/?folder=$RUN/workspace" "$RUN" "$PYTHON"
took "done"
