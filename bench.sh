#!/bin/sh
# Benchmark: Keepsake against the in-browser way, side by side in one headless Chromium run
# (performance.md §6, issue 6). Builds the release host and the release echo host, then runs
# bench/run.mjs, which prints one table and writes BENCHMARKS.md, docs/bench/send-latency.svg and
# docs/bench/scale.svg (the scale sweep, bench/scale.mjs).
#
#   ./bench.sh                  the full run (≈ 15–25 min on 2 cores, the scale sweep included)
#   BENCH_QUICK=1 ./bench.sh    few rounds and small inputs, for development (writes nothing here)
#   BENCH_ONLY=search ./bench.sh  scenario 8 alone, printed only
#   BENCH_ONLY=text ./bench.sh    scenario 4 alone, with a timeline of its turns, printed only
#   BENCH_ONLY=scale ./bench.sh   the scale sweep (bench/scale.mjs) alone: 100 → 1,000 → 10,000 saved
#                                 sessions, printed only (the Scale section and chart go to a temp dir);
#                                 with BENCH_QUICK=1, 30 → 100 → 300 in ~1 min
#   BENCH_ONLY=import ./bench.sh  import throughput (bench/import.mjs): scenario 8's 128 MiB export
#                                 imported by the release keepsake-host 3 times, MB/s and peak RSS,
#                                 printed only
#   BENCH_ONLY=panel ./bench.sh   scenario 6 alone (panel first text paint, pictures shown), printed only
#   BENCH_ONLY=start ./bench.sh   scenario 9's host start alone (bench/host-start.mjs): keepsake-host
#                                 and the echo host, interleaved rounds, spawn → hello and → open, printed only
#   BENCH_ONLY=read ./bench.sh    reading pages (bench/reading.mjs): characters sent for the five
#                                 pages of tests/e2e/pages/ old way and new, extraction time, printed only
#   BENCH_ONLY=backups ./bench.sh "Back up now", a restore and a pre-migration copy at 10,000 sessions
#                                 (KEEPSAKE_BACKUP_SESSIONS), time and peak RSS with the release host
#                                 (bench/backups.mjs: T27's figures test, 3 rounds), printed only
#   BENCH_ONLY=sync ./bench.sh    sync with the release host (bench/sync.mjs): folder bytes per byte
#                                 stored, a new device joining a folder of 10,000 sessions
#                                 (KEEPSAKE_SYNC_SESSIONS; seconds, peak RSS, operations/s, MB/s) and
#                                 two hosts through real Syncthing (T32, KEEPSAKE_SYNC_EDITS), printed only
#
# Needs cargo, node >= 20, npm, /usr/bin/chromium (Debian's; never downloaded) and playwright-core
# in tests/e2e/node_modules (installed with `npm ci` there when missing). Exit status 0 unless
# something broke; no absolute-time pass/fail.
set -eu

root=$(cd "$(dirname "$0")" && pwd)
cd "${root}"

say() { printf '==> bench: %s\n' "$*" >&2; }

case "${1:-}" in
-h | --help)
	sed -n '2,29p' "$0"
	exit 0
	;;
esac

if [ "${BENCH_ONLY:-}" = import ]; then
	say "cargo build --release (keepsake-host)"
	cargo build --release --locked --bin keepsake-host
	# node only (no browser)
	KEEPSAKE_E2E_HOST_BIN="${CARGO_TARGET_DIR:-${root}/target}/release/keepsake-host"
	export KEEPSAKE_E2E_HOST_BIN
	say "node bench/import.mjs"
	exec node bench/import.mjs
fi

if [ "${BENCH_ONLY:-}" = backups ]; then
	say "cargo build --release (keepsake-host)"
	cargo build --release --locked --bin keepsake-host
	# bench/backups.mjs runs T27's figures test with the release host, 3 rounds: a database of
	# KEEPSAKE_BACKUP_SESSIONS (default 10,000) sessions, then "Back up now", a restore of that copy
	# and a pre-migration copy (the same database one schema back, opened by the host): time and
	# the host's peak RSS of each
	KEEPSAKE_HOST_BIN="${CARGO_TARGET_DIR:-${root}/target}/release/keepsake-host"
	KEEPSAKE_BACKUP_SESSIONS="${KEEPSAKE_BACKUP_SESSIONS:-10000}"
	export KEEPSAKE_HOST_BIN KEEPSAKE_BACKUP_SESSIONS
	say "node bench/backups.mjs (${KEEPSAKE_BACKUP_SESSIONS} sessions, 3 rounds)"
	exec node bench/backups.mjs
fi

if [ "${BENCH_ONLY:-}" = sync ]; then
	say "cargo build --release (keepsake-host)"
	cargo build --release --locked --bin keepsake-host
	# bench/sync.mjs runs the sync figures test (tests/it/sync/figures.rs) with the release host:
	# KEEPSAKE_SYNC_SESSIONS (default 10,000) sessions sealed into a folder by one device, then a
	# new device joining it; and T32 (tests/it/sync/converge.rs) through two real Syncthing instances
	KEEPSAKE_HOST_BIN="${CARGO_TARGET_DIR:-${root}/target}/release/keepsake-host"
	KEEPSAKE_SYNC_SESSIONS="${KEEPSAKE_SYNC_SESSIONS:-10000}"
	export KEEPSAKE_HOST_BIN KEEPSAKE_SYNC_SESSIONS
	say "node bench/sync.mjs (${KEEPSAKE_SYNC_SESSIONS} sessions)"
	exec node bench/sync.mjs
fi

chromium_bin="${KEEPSAKE_E2E_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "${chromium_bin}" ]; then
	echo "bench: ${chromium_bin} not found (sudo apt-get install chromium)" >&2
	exit 1
fi
if ! command -v node >/dev/null 2>&1; then
	echo "bench: node not found (Node.js 20 or newer is needed)" >&2
	exit 1
fi

if [ ! -d tests/e2e/node_modules/playwright-core ]; then
	say "npm ci (tests/e2e: playwright-core)"
	(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
fi

if [ "${BENCH_ONLY:-}" = read ]; then
	say "node bench/reading.mjs"
	KEEPSAKE_E2E_CHROMIUM="${chromium_bin}"
	export KEEPSAKE_E2E_CHROMIUM
	exec node bench/reading.mjs
fi

say "cargo build --release (keepsake-host, examples/echo_host)"
cargo build --release --locked --bin keepsake-host --example echo_host

target="${CARGO_TARGET_DIR:-${root}/target}"
case "${target}" in
/*) ;;
*) target="${root}/${target}" ;;
esac
KEEPSAKE_E2E_HOST_BIN="${target}/release/keepsake-host"
BENCH_ECHO_BIN="${target}/release/examples/echo_host"
KEEPSAKE_E2E_CHROMIUM="${chromium_bin}"
export KEEPSAKE_E2E_HOST_BIN BENCH_ECHO_BIN KEEPSAKE_E2E_CHROMIUM

if [ "${BENCH_ONLY:-}" = start ]; then
	say "node bench/host-start.mjs"
	KEEPSAKE_HOST_BIN="${KEEPSAKE_E2E_HOST_BIN}"
	export KEEPSAKE_HOST_BIN
	exec node bench/host-start.mjs
fi

say "node bench/run.mjs"
exec node bench/run.mjs
