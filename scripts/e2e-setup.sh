#!/usr/bin/env bash
# e2e-setup.sh installs the real ACP agents that the end-to-end tests in
# conformance/e2e run offline against conformance/mockllm. It is idempotent:
# when the pinned version is already installed it only prints the entry point.
#
# Usage: scripts/e2e-setup.sh
# Prints the absolute path of claude-agent-acp's dist/index.js on stdout.
# Everything else goes to stderr, so `$(scripts/e2e-setup.sh)` is usable.
set -euo pipefail

# Pinned so that the observed behaviour in conformance/e2e/NOTES.md stays true.
CLAUDE_AGENT_ACP_VERSION="${CLAUDE_AGENT_ACP_VERSION:-0.23.1}"
PKG="@zed-industries/claude-agent-acp"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/.cache/e2e/claude-agent-acp"
entry="$dir/node_modules/$PKG/dist/index.js"
pkgjson="$dir/node_modules/$PKG/package.json"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "e2e-setup: node and npm are required" >&2
	exit 1
fi

installed=""
if [[ -f "$pkgjson" ]]; then
	installed="$(node -p 'require(process.argv[1]).version' "$pkgjson" 2>/dev/null || true)"
fi

if [[ "$installed" != "$CLAUDE_AGENT_ACP_VERSION" || ! -f "$entry" ]]; then
	echo "e2e-setup: installing $PKG@$CLAUDE_AGENT_ACP_VERSION into $dir" >&2
	mkdir -p "$dir"
	# --prefix keeps the install out of the repo's own (nonexistent) package.json;
	# stdout goes to stderr so only the path below reaches the caller's stdout.
	npm install --prefix "$dir" --no-audit --no-fund --save-exact \
		"$PKG@$CLAUDE_AGENT_ACP_VERSION" 1>&2
fi

if [[ ! -f "$entry" ]]; then
	echo "e2e-setup: $entry missing after install" >&2
	exit 1
fi
echo "$entry"
