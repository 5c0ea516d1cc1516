#!/usr/bin/env bash
# e2e-setup.sh installs the real ACP agents that the end-to-end tests in
# conformance/e2e run offline against conformance/mockllm, each pinned, each
# into its own folder under .cache/e2e. It is idempotent: a package already
# installed at its pinned version is not installed again.
#
# Usage: scripts/e2e-setup.sh [AGENT]
# Installs every agent below, then prints the absolute path of AGENT's entry
# point (a node script) on stdout. AGENT is one of
#   claude-0.23   @zed-industries/claude-agent-acp 0.23.1 (the default: what
#                 this script printed before the agents moved scope)
#   claude        @agentclientprotocol/claude-agent-acp 0.101.0
#   codex         @agentclientprotocol/codex-acp 2.6.0, with @openai/codex 0.166.0
#   sdk           @agentclientprotocol/sdk 2.4.0 with ws 8.23.1: the SDK's own
#                 HTTP and WebSocket clients, which the tests of `serve` drive
#                 (prints the folder whose node_modules holds them)
# Everything else goes to stderr, so `$(scripts/e2e-setup.sh codex)` is usable.
set -euo pipefail

# Pinned so that the observed behaviour in conformance/e2e/NOTES.md stays true.
CLAUDE_LEGACY_VERSION="${CLAUDE_LEGACY_VERSION:-0.23.1}"
CLAUDE_AGENT_ACP_VERSION="${CLAUDE_AGENT_ACP_VERSION:-0.101.0}"
CODEX_ACP_VERSION="${CODEX_ACP_VERSION:-2.6.0}"
# codex-acp asks for ^0.166.0; pinning it too keeps a newer codex from
# changing what the tests observe. npm dedupes it under codex-acp.
CODEX_VERSION="${CODEX_VERSION:-0.166.0}"
# The SDK whose experimental transport `acp-sidecar serve` speaks, and the
# WebSocket package its ws-client needs on Node 20 (no global WebSocket).
SDK_VERSION="${SDK_VERSION:-2.4.0}"
WS_VERSION="${WS_VERSION:-8.23.1}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache/e2e"

want="${1:-claude-0.23}"
case "$want" in
claude-0.23 | claude | codex | sdk) ;;
*)
	echo "usage: scripts/e2e-setup.sh [claude-0.23|claude|codex|sdk]" >&2
	exit 2
	;;
esac

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "e2e-setup: node and npm are required" >&2
	exit 1
fi

# version DIR PKG prints the version of PKG installed under DIR, or nothing.
version() {
	local pkgjson="$1/node_modules/$2/package.json"
	[[ -f "$pkgjson" ]] || return 0
	node -p 'require(process.argv[1]).version' "$pkgjson" 2>/dev/null || true
}

# install DIR ENTRY PKG@VERSION... installs the packages, exactly at their
# versions, into DIR unless each is already there at its version and ENTRY
# (relative to DIR/node_modules) exists. It fails if ENTRY is still missing.
install() {
	local dir="$1" entry="$2"
	shift 2
	local spec missing=""
	for spec in "$@"; do
		local pkg="${spec%@*}" ver="${spec##*@}"
		if [[ "$(version "$dir" "$pkg")" != "$ver" ]]; then
			missing=1
		fi
	done
	if [[ -n "$missing" || ! -f "$dir/node_modules/$entry" ]]; then
		echo "e2e-setup: installing $* into $dir" >&2
		mkdir -p "$dir"
		# --prefix keeps the install out of the repo's own (nonexistent)
		# package.json; npm's stdout goes to stderr so only the path below
		# reaches the caller's stdout.
		npm install --prefix "$dir" --no-audit --no-fund --save-exact "$@" 1>&2
	fi
	if [[ ! -f "$dir/node_modules/$entry" ]]; then
		echo "e2e-setup: $dir/node_modules/$entry missing after install" >&2
		exit 1
	fi
}

legacy_entry="@zed-industries/claude-agent-acp/dist/index.js"
claude_entry="@agentclientprotocol/claude-agent-acp/dist/index.js"
codex_entry="@agentclientprotocol/codex-acp/dist/index.js"

install "$cache/claude-agent-acp" "$legacy_entry" \
	"@zed-industries/claude-agent-acp@$CLAUDE_LEGACY_VERSION"
install "$cache/agentclientprotocol-claude-agent-acp" "$claude_entry" \
	"@agentclientprotocol/claude-agent-acp@$CLAUDE_AGENT_ACP_VERSION"
install "$cache/agentclientprotocol-codex-acp" "$codex_entry" \
	"@agentclientprotocol/codex-acp@$CODEX_ACP_VERSION" "@openai/codex@$CODEX_VERSION"
install "$cache/sdk-client" "@agentclientprotocol/sdk/dist/transports/http-stream.js" \
	"@agentclientprotocol/sdk@$SDK_VERSION" "ws@$WS_VERSION"

case "$want" in
claude-0.23) echo "$cache/claude-agent-acp/node_modules/$legacy_entry" ;;
claude) echo "$cache/agentclientprotocol-claude-agent-acp/node_modules/$claude_entry" ;;
codex) echo "$cache/agentclientprotocol-codex-acp/node_modules/$codex_entry" ;;
sdk) echo "$cache/sdk-client" ;;
esac
