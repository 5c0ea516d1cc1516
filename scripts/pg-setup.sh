#!/usr/bin/env bash
# pg-setup.sh makes sure the tests can start a throwaway PostgreSQL
# (state/pgtest): initdb and postgres on PATH or in Debian's
# /usr/lib/postgresql/N/bin, and, when the tests run as root, a postgres
# user to run the server as (initdb refuses root). On Debian it installs
# the postgresql package with apt; elsewhere it fails and says what is
# missing. It is idempotent.
set -euo pipefail

have_binaries() {
	if command -v initdb >/dev/null && command -v postgres >/dev/null; then
		return 0
	fi
	compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

if ! have_binaries; then
	if ! command -v apt-get >/dev/null; then
		echo "pg-setup: PostgreSQL's initdb and postgres are not installed, and this is not Debian: install PostgreSQL 15 or later, then run the tests again" >&2
		exit 1
	fi
	sudo=()
	if [[ "$(id -u)" != 0 ]]; then
		sudo=(sudo)
	fi
	echo "pg-setup: installing postgresql with apt" >&2
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends postgresql >&2 ||
		{ "${sudo[@]}" apt-get update >&2 && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends postgresql >&2; }
	have_binaries || { echo "pg-setup: apt installed postgresql, but initdb is still not found" >&2; exit 1; }
fi

if [[ "$(id -u)" == 0 ]] && ! getent passwd postgres >/dev/null; then
	echo "pg-setup: adding a postgres system user to run the test server as" >&2
	useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
fi
