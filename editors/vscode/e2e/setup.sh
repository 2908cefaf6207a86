#!/bin/sh
# Installs what run.sh needs into e2e/.tools (git-ignored), offline except for
# the npm registry: code-server 4.100.3 (the last release for Node 20, VS Code
# 1.100.3) and playwright-core (no browsers: apt's chromium is used).
# Needs, from apt: build-essential pkg-config python3 libkrb5-dev ripgrep chromium.
set -eu
cd "$(dirname "$0")"
mkdir -p .tools
cd .tools
export npm_config_unsafe_perm=true  # code-server's postinstall refuses root without it
export npm_config_yes=true          # node-pty's post-install runs `npx node-gyp`
# --ignore-scripts: code-server's own postinstall would run @vscode/ripgrep's,
# which downloads rg from GitHub; the steps it takes are done below instead.
npm install --no-audit --no-fund --ignore-scripts --prefix . code-server@4.100.3 playwright-core@1.52.0
npm rebuild argon2 --build-from-source
cd node_modules/code-server/lib/vscode
npm install --omit=dev --no-audit --no-fund --ignore-scripts
# @vscode/ripgrep's postinstall exits when bin/ exists; VS Code's search runs bin/rg.
mkdir -p node_modules/@vscode/ripgrep/bin
ln -sf "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
npm rebuild  # the native modules (node-pty, spdlog, ...), built with node-gyp
# The rest of code-server's postinstall.sh (vscode_install):
ln -sfn node_modules node_modules.asar
(cd bin/remote-cli && ln -sf code-linux.sh code-server)
(cd bin/helpers && ln -sf browser-linux.sh browser.sh)
(cd extensions && npm install --omit=dev --no-audit --no-fund)
