#!/usr/bin/env bash
# Installs the npm packages the tests run against (the MCP servers
# @modelcontextprotocol/server-everything and server-filesystem), at the
# versions pinned in test/mcp-servers/package-lock.json, into
# test/mcp-servers/node_modules (gitignored). Reinstalls only when the
# lock file changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/../test/mcp-servers"
if ! command -v npm >/dev/null 2>&1; then
  echo "npm-deps: npm is not installed: install Node.js 20 or later (it brings npm)" >&2
  exit 1
fi
stamp=node_modules/.lovia-lock
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then
  exit 0
fi
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
cp package-lock.json "$stamp"
echo "npm-deps: installed $(node -e 'const d=require("./package.json").dependencies;console.log(Object.entries(d).map(([k,v])=>k+"@"+v).join(" "))')"
