#!/usr/bin/env bash
# Every test tier, from a fresh Debian machine: installs what the tests need, then runs
#   1. cargo fmt --check          2. cargo clippy -D warnings
#   3. cargo test (unit, property and black-box tests over the real binary and a real SQLite file)
# Later tiers (node --test for the extension, headless Chromium end-to-end) are added with the
# extension. Exits non-zero on the first failing tier.
set -euo pipefail
cd "$(dirname "$0")"

step() { printf '\n==> %s\n' "$*"; }
started=$(date +%s)

if ! command -v cargo >/dev/null 2>&1; then
	echo "cargo not found: install Rust (https://rustup.rs) first" >&2
	exit 1
fi

step "fetching Rust crates"
cargo fetch --locked 2>/dev/null || cargo fetch

step "cargo fmt --check"
cargo fmt --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings

step "cargo test"
cargo test --locked --no-fail-fast

step "done in $(($(date +%s) - started)) s"
