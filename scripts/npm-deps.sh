#!/usr/bin/env bash
# Installs the npm packages the tests run against, at the versions pinned
# in each directory's package-lock.json, into its node_modules (gitignored):
#   test/mcp-servers             the MCP servers @modelcontextprotocol/server-everything
#                                and server-filesystem
#   examples/tool-service-node   the Node.js tool service (@nats-io/services)
# Reinstalls a directory only when its lock file changed since its last install.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v npm >/dev/null 2>&1; then
  echo "npm-deps: npm is not installed: install Node.js 20 or later (it brings npm)" >&2
  exit 1
fi
for dir in test/mcp-servers examples/tool-service-node; do
  cd "$root/$dir"
  stamp=node_modules/.lovia-lock
  if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then
    continue
  fi
  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
  cp package-lock.json "$stamp"
  echo "npm-deps: $dir: $(node -e 'const d=require("./package.json").dependencies;console.log(Object.entries(d).map(([k,v])=>k+"@"+v).join(" "))')"
done
