#!/bin/sh
# Builds the extension and packages it as fixdev-VERSION.vsix in editors/vscode/
# (npm from the registry: the versions package-lock.json pins).
set -eu
cd "$(dirname "$0")/.."
if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
npx tsc -p .
# --no-dependencies would drop vscode-languageclient, which the extension
# loads at run time: vsce packs the production dependencies from node_modules.
npx vsce package --skip-license --allow-missing-repository
