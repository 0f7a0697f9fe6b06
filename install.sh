#!/bin/sh
# Keepsake installer (Linux and macOS): builds the release binary and installs it for this user.
# Browser registration (host manifests for every Chromium-family browser) is done by
# `keepsake-host install`, which arrives with the extension; until then this script installs the
# host binary and tells you how to inspect your data.
set -eu

main() {
	need_cmd cargo
	cd "$(dirname "$0")"
	echo "==> building keepsake-host (release)"
	cargo build --release --locked
	bin_dir="${KEEPSAKE_BIN_DIR:-${HOME}/.local/bin}"
	mkdir -p "${bin_dir}"
	install -m 0755 target/release/keepsake-host "${bin_dir}/keepsake-host"
	echo "==> installed ${bin_dir}/keepsake-host"
	"${bin_dir}/keepsake-host" doctor || true
	cat <<MSG

Next steps
  * Inspect your data:   keepsake-host inspect   (the "database path" line above is the file
                         to open with sqlite3; try: SELECT * FROM about;)
  * Load the extension:  chrome://extensions -> Developer mode -> Load unpacked -> $(pwd)/extension
    (the extension and browser registration ship with the next release; see README.md)
MSG
}

need_cmd() {
	if ! command -v "$1" >/dev/null 2>&1; then
		echo "install.sh: '$1' is required (install Rust from https://rustup.rs)" >&2
		exit 1
	fi
}

main "$@"
