#!/bin/sh
# End-to-end tests: the real extension and the real keepsake-host in Debian's headless Chromium,
# driven by playwright-core, and the Firefox build in Debian's firefox-esr, driven over WebDriver
# BiDi by puppeteer-core (firefox/, its own package.json); never a downloaded browser. Called by
# ./test.sh.
#
#   tests/e2e/run.sh                            every *.e2e.mjs and firefox/*.e2e.mjs, one file at a time
#   tests/e2e/run.sh journey.e2e.mjs            only the named files
#   tests/e2e/run.sh firefox/firefox.e2e.mjs    only the Firefox tests
#   tests/e2e/run.sh --screenshots              also refresh docs/screenshots/*.png
#
# Needs: node >= 20, npm, cargo, /usr/bin/chromium, /usr/bin/firefox-esr and /usr/bin/sqlite3, and for secrets.e2e.mjs
# dbus, gnome-keyring and libsecret-tools (installed with apt-get when missing and running as
# root). Failure artifacts (page screenshots, console and host logs): tests/e2e/artifacts/<test>/.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "${here}/../.." && pwd)
started=$(date +%s)

files=""
for arg in "$@"; do
	case "${arg}" in
	--screenshots) KEEPSAKE_E2E_UPDATE_SCREENSHOTS=1 ;;
	-h | --help)
		sed -n '2,15p' "$0"
		exit 0
		;;
	*) files="${files} ${arg}" ;;
	esac
done
export KEEPSAKE_E2E_UPDATE_SCREENSHOTS="${KEEPSAKE_E2E_UPDATE_SCREENSHOTS:-0}"

say() { printf '\n==> e2e: %s\n' "$*"; }

# ---- system packages: Debian's chromium and the sqlite3 CLI (the tests read the database with it)
chromium_bin="${KEEPSAKE_E2E_CHROMIUM:-/usr/bin/chromium}"
firefox_bin="${KEEPSAKE_E2E_FIREFOX:-/usr/bin/firefox-esr}"
missing=""
[ -x "${chromium_bin}" ] || missing="${missing} chromium"
[ -x "${firefox_bin}" ] || missing="${missing} firefox-esr"
command -v sqlite3 >/dev/null 2>&1 || missing="${missing} sqlite3"
# a real Secret Service for secrets.e2e.mjs (D-Bus, GNOME Keyring, secret-tool): installed like the
# others when running as root; elsewhere that test skips with a message naming what is missing
keyring=""
command -v dbus-daemon >/dev/null 2>&1 || keyring="${keyring} dbus"
command -v gnome-keyring-daemon >/dev/null 2>&1 || keyring="${keyring} gnome-keyring"
command -v secret-tool >/dev/null 2>&1 || keyring="${keyring} libsecret-tools"
# the README's screenshots include the panel in Chinese (i18n.e2e.mjs): without a CJK font it would
# draw boxes, so --screenshots brings one (the tests themselves read text, not pixels)
if [ "${KEEPSAKE_E2E_UPDATE_SCREENSHOTS}" = 1 ] && ! fc-list 2>/dev/null | grep -qi 'CJK'; then
	missing="${missing} fonts-noto-cjk"
fi
uid=$(id -u)
if [ -n "${missing}${keyring}" ] && [ "${uid}" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	say "installing${missing}${keyring} (apt-get)"
	apt-get update -qq
	# shellcheck disable=SC2086 # word splitting of the package list is intended
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${missing}${keyring} >/dev/null
elif [ -n "${missing}" ]; then
	echo "e2e: missing${missing}; install with: sudo apt-get install${missing}" >&2
	exit 1
elif [ -n "${keyring}" ]; then
	say "secrets.e2e.mjs will skip its keyring test: missing${keyring} (sudo apt-get install${keyring})"
fi

if ! command -v node >/dev/null 2>&1; then
	echo "e2e: node not found (Node.js 20 or newer is needed)" >&2
	exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "${node_major}" -lt 20 ]; then
	node_version=$(node --version)
	echo "e2e: Node.js ${node_version} is too old (20 or newer is needed)" >&2
	exit 1
fi

# ---- npm packages (playwright-core, and puppeteer-core for firefox/ and sync.e2e.mjs, which drives
# Firefox through firefox/launch.mjs; each pinned in its package-lock.json)
say "npm ci"
(cd "${here}" && npm ci --no-audit --no-fund --loglevel=error)
case "${files:- firefox/}" in
*firefox/* | *sync.e2e.mjs*) (cd "${here}/firefox" && npm ci --no-audit --no-fund --loglevel=error) ;;
*) ;;
esac

# ---- the host binary the tests register with `keepsake-host install --user-data-dir`
say "cargo build (debug keepsake-host)"
(cd "${root}" && cargo build --locked --bin keepsake-host)
target="${CARGO_TARGET_DIR:-${root}/target}"
case "${target}" in
/*) ;;
*) target="${root}/${target}" ;;
esac
KEEPSAKE_E2E_HOST_BIN="${KEEPSAKE_E2E_HOST_BIN:-${target}/debug/keepsake-host}"
export KEEPSAKE_E2E_HOST_BIN
if [ ! -x "${KEEPSAKE_E2E_HOST_BIN}" ]; then
	echo "e2e: no host binary at ${KEEPSAKE_E2E_HOST_BIN}" >&2
	exit 1
fi

# ---- the tests: one file at a time (each launches at most two browsers; the machine has 2 cores)
cd "${here}"
if [ -z "${files}" ]; then
	files=$(ls ./*.e2e.mjs ./firefox/*.e2e.mjs)
fi
mkdir -p artifacts
tap="artifacts/last-run.tap"
rm -f "${tap}"
listed=$(printf ' %s' "${files}" | tr '\n' ' ')
say "node --test${listed}"
guard=""
if command -v timeout >/dev/null 2>&1; then
	guard="timeout -k 10 900"
fi
status=0
# shellcheck disable=SC2086 # $guard and $files are word lists
${guard} node --test --test-concurrency=1 --test-timeout=300000 \
	--test-reporter=spec --test-reporter-destination=stdout \
	--test-reporter=tap --test-reporter-destination="${tap}" \
	${files} || status=$?

pass=""
fail=""
if [ -f "${tap}" ]; then
	pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "${tap}" | tail -n 1)
	fail=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "${tap}" | tail -n 1)
fi
if [ "${status}" -ne 0 ] && [ "${fail:-0}" = 0 ]; then
	fail=1 # the runner itself failed (timeout, crash): never report a clean run
fi
finished=$(date +%s)
say "done in $((finished - started)) s (exit ${status}); failure artifacts: tests/e2e/artifacts/"
echo "e2e: ${pass:-0} passed, ${fail:-0} failed"
exit "${status}"
