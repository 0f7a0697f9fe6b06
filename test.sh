#!/usr/bin/env bash
# Every test tier, from a fresh Debian machine: installs what the tests need, then runs
#   1. cargo fmt --check          2. cargo clippy -D warnings
#   3. cargo test (unit, property and black-box tests over the real binary and a real SQLite file,
#      the installer in a temp HOME, shellcheck of install.sh)
#   4. node --test for the extension's modules (port client, storage, markdown safety, pills, caps,
#      LLM streaming against a local mock server, chat turns, site caches)
#   4b. the store archives (keepsake-chrome.zip, keepsake-firefox.xpi) and `web-ext lint`
#   5. end to end: the real unpacked extension in Debian's headless Chromium (playwright-core) with
#      the real host registered by `keepsake-host install --user-data-dir`, and its Firefox build
#      in Debian's firefox-esr over WebDriver BiDi (puppeteer-core), one database for both, and
#      two databases (Chromium's and Firefox's) sharing one sync folder
#   5b. the Debian package, as root: built from the debug binary, `dpkg -i`, doctor, Chromium
#      through the system-wide manifest, `dpkg --purge` leaves no file behind (tests/deb/run.sh)
#   6. fuzzing, 60 s per target, when a nightly toolchain and cargo-fuzz are installed (T07)
# Exits non-zero on the first failing tier. KEEPSAKE_SKIP_E2E=1 skips tier 5 and KEEPSAKE_SKIP_DEB=1
# tier 5b (local iteration only).
set -euo pipefail
cd "$(dirname "$0")"

started=$(date +%s)
# every step says how long the run has taken so far (CI's budget is 45 min on 2 cores)
step() { printf '\n==> [%ss] %s\n' "$(($(date +%s) - started))" "$*"; }

if ! command -v cargo >/dev/null 2>&1; then
	echo "cargo not found: install Rust (https://rustup.rs) first" >&2
	exit 1
fi

# Debian packages the tests need: chromium and firefox-esr (end to end), shellcheck (installer lint), sqlite3, and a
# real Secret Service for the API-key tests (tests/it/settings/secrets.rs, tests/e2e/secrets.e2e.mjs
# start a D-Bus session bus and GNOME Keyring of their own; secret-tool looks at what it holds)
# fuse3 (T20's power-cut filesystem: fusermount3 mounts it where mount(2) is not allowed)
# openssl (a test certificate for pages served under youtube.com names: tests/e2e/reading.e2e.mjs)
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -x /usr/bin/firefox-esr ] || missing+=(firefox-esr)
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
command -v shfmt >/dev/null 2>&1 || missing+=(shfmt)
command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
command -v dbus-daemon >/dev/null 2>&1 || missing+=(dbus)
command -v gnome-keyring-daemon >/dev/null 2>&1 || missing+=(gnome-keyring)
command -v secret-tool >/dev/null 2>&1 || missing+=(libsecret-tools)
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# syncthing (tests/it/sync/: two real instances on loopback replicate the sync folder)
command -v syncthing >/dev/null 2>&1 || missing+=(syncthing)
# dpkg-dev (dpkg-shlibdeps: the package's Depends line, packaging/deb/build.sh)
command -v dpkg-shlibdeps >/dev/null 2>&1 || missing+=(dpkg-dev)
if [ "${#missing[@]}" -gt 0 ]; then
	step "installing Debian packages: ${missing[*]}"
	sudo_cmd=()
	[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
	"${sudo_cmd[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# installed above: the keyring tests run, and fail rather than skip if they cannot
export KEEPSAKE_REQUIRE_KEYRING=1
export KEEPSAKE_REQUIRE_SYNCTHING=1

step "fetching Rust crates"
cargo fetch --locked 2>/dev/null || cargo fetch

step "cargo fmt --check"
cargo fmt --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings

# T20 (tests/it/concurrency/power.rs) mounts a FUSE filesystem: without /dev/fuse it skips, and
# says so here
[ -e /dev/fuse ] || step "note: /dev/fuse is missing: T20 (power cuts, concurrency::power) will skip"

step "cargo test"
cargo test --locked --no-fail-fast

step "shellcheck install.sh test.sh bench.sh tests/e2e/run.sh fuzz/run.sh packaging/deb/build.sh tests/deb/run.sh"
shellcheck install.sh test.sh bench.sh tests/e2e/run.sh fuzz/run.sh packaging/deb/build.sh tests/deb/run.sh

step "npm ci in vendor/ (the pinned libraries extension/vendor/ copies; extension/vendor.test.js compares them)"
(cd vendor && npm ci --omit=optional --no-audit --no-fund --loglevel=error)

step "node --test extension/ bench/ (extension modules; the benchmark's report code)"
node --test extension/ bench/

# the store archives (keepsake-chrome.zip, keepsake-firefox.xpi) and Mozilla's web-ext lint of the
# Firefox build: the script fails on any lint error (~30 s with web-ext's npm ci)
step "store archives and web-ext lint (scripts/archives.mjs)"
archives=$(mktemp -d)
node scripts/archives.mjs "${archives}"
rm -rf "${archives}"

if [ "${KEEPSAKE_SKIP_E2E:-0}" = 1 ]; then
	step "end to end skipped (KEEPSAKE_SKIP_E2E=1)"
else
	step "end to end in headless Chromium (and firefox/firefox.e2e.mjs and sync.e2e.mjs in firefox-esr)"
	tests/e2e/run.sh
fi

# The .deb installed into this machine and purged again (needs root and dpkg; the script says so
# and skips otherwise). ~30 s: packs the debug binary already built (zstd), no release build.
if [ "${KEEPSAKE_SKIP_DEB:-0}" = 1 ]; then
	step "Debian package skipped (KEEPSAKE_SKIP_DEB=1)"
else
	step "Debian package: build, dpkg -i, doctor, Chromium end to end, dpkg --purge (tests/deb/run.sh)"
	tests/deb/run.sh
fi

# T07 (reliability.md): 60 s per fuzz target when a nightly toolchain and cargo-fuzz exist (the
# corpus replay already ran in cargo test). A cold fuzz build takes 10-25 min on 2 cores.
# KEEPSAKE_SKIP_FUZZ=1 skips it; FUZZ_TARGET_DIR shares a fuzz build directory between checkouts.
if [ "${KEEPSAKE_SKIP_FUZZ:-0}" = 1 ]; then
	step "fuzz skipped (KEEPSAKE_SKIP_FUZZ=1)"
elif cargo +nightly --version >/dev/null 2>&1 && cargo +nightly fuzz --version >/dev/null 2>&1; then
	step "fuzz: ${KEEPSAKE_FUZZ_SECONDS:-60} s per target (T07)"
	scratch=$(mktemp -d)
	FUZZ_SCRATCH_DIR="$scratch/corpus" FUZZ_LOG_DIR="$scratch/logs" FUZZ_RECORD=0 \
		fuzz/run.sh "${KEEPSAKE_FUZZ_SECONDS:-60}"
	rm -rf "$scratch"
else
	step "fuzz: skipped (needs a nightly toolchain and cargo-fuzz; the corpus replay ran in cargo test)"
fi

step "done in $(($(date +%s) - started)) s"
