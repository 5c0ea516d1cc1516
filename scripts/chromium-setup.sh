#!/usr/bin/env bash
# chromium-setup.sh makes sure the browser tests of `acp-sidecar ui`
# (cmd/acp-sidecar/ui_browser_test.go) find a headless Chromium: chromium
# (or chromium-browser, google-chrome) on PATH. On Debian it installs the
# chromium package with apt; elsewhere it fails and says what is missing.
# Those tests never skip in CI, so a missing browser fails the run here,
# with this message, rather than there. It is idempotent.
set -euo pipefail

have_browser() {
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null
}

if ! have_browser; then
	if ! command -v apt-get >/dev/null; then
		echo "chromium-setup: no Chromium on PATH (chromium, chromium-browser or google-chrome), and this is not Debian: install Chromium, then run the tests again" >&2
		exit 1
	fi
	sudo=()
	if [[ "$(id -u)" != 0 ]]; then
		sudo=(sudo)
	fi
	echo "chromium-setup: installing chromium with apt" >&2
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends chromium >&2 ||
		{ "${sudo[@]}" apt-get update >&2 && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends chromium >&2; }
	have_browser || { echo "chromium-setup: apt installed chromium, but no chromium is on PATH" >&2; exit 1; }
fi
