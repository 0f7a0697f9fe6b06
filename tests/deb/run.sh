#!/bin/sh
# The Debian package on the real system (issue 22): build the .deb from the debug binary
# (packaging/deb/build.sh --bin, zstd), list every path under /usr /etc /opt and dpkg's info
# folder, `dpkg -i` it, then check that
#   - what dpkg installed is what the package promises, and `keepsake-host doctor --json` passes
#     with the packaged manifests in the four system-wide Chromium-family folders, each running
#     /usr/bin/keepsake-host (tests/deb/installed.test.mjs);
#   - Chromium reaches the packaged host end to end (same file: no per-profile registration, the
#     extension loaded from /usr/share/keepsake/extension, one chat turn to the mock LLM, the
#     SQLite file holds it);
#   - `dpkg -r` removes the binary and keeps the manifests (conffiles), `dpkg --purge` removes
#     them, and the listing is the same as before: no file left behind, none taken away.
# Called by ./test.sh. Installs into this machine's real /usr and /etc, so it needs root and dpkg
# (it says so and skips otherwise), and refuses to run where keepsake-host is already installed.
#
#   tests/deb/run.sh             build the package from target/debug/keepsake-host (cargo build)
#   tests/deb/run.sh --deb FILE  test an already-built package instead
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "${here}/../.." && pwd)
started=$(date +%s)
say() {
	now=$(date +%s)
	printf '==> deb [%ss]: %s\n' "$((now - started))" "$*"
}

deb=""
case "${1:-}" in
--deb) deb=${2:?--deb needs a file} ;;
-h | --help)
	awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"
	exit 0
	;;
"") ;;
*)
	echo "tests/deb/run.sh: unknown argument $1" >&2
	exit 2
	;;
esac

uid=$(id -u)
if [ "${uid}" != 0 ]; then
	say "SKIPPED: installing a package needs root (run as root, or in CI)"
	exit 0
fi
if ! command -v dpkg >/dev/null 2>&1; then
	say "SKIPPED: dpkg not found (not a Debian-family system)"
	exit 0
fi
# what the package ships must not be on this machine already: the test would replace and then
# delete it
if dpkg-query -W -f='${Status}' keepsake-host 2>/dev/null | grep -q 'installed\|config-files'; then
	echo "tests/deb/run.sh: the keepsake-host package is installed here; it would be purged. Remove it first (sudo dpkg --purge keepsake-host)" >&2
	exit 1
fi
for f in /usr/bin/keepsake-host /etc/chromium/native-messaging-hosts/dev.keepsake.host.json \
	/etc/opt/chrome/native-messaging-hosts/dev.keepsake.host.json \
	/usr/lib/mozilla/native-messaging-hosts/dev.keepsake.host.json /usr/share/keepsake; do
	if [ -e "${f}" ]; then
		echo "tests/deb/run.sh: ${f} exists (a system-wide install?); the package would overwrite it. Remove it first (sudo keepsake-host uninstall --system)" >&2
		exit 1
	fi
done

work=$(mktemp -d)
installed=""
cleanup() {
	status=$?
	if [ -n "${installed}" ]; then
		say "cleaning up: dpkg --purge keepsake-host"
		dpkg --purge keepsake-host >/dev/null 2>&1 || true
	fi
	rm -rf "${work}"
	exit "${status}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${deb}" ]; then
	say "cargo build (debug keepsake-host)"
	(cd "${root}" && cargo build --locked --bin keepsake-host)
	target="${CARGO_TARGET_DIR:-${root}/target}"
	case "${target}" in
	/*) ;;
	*) target="${root}/${target}" ;;
	esac
	say "packaging/deb/build.sh --bin ${target}/debug/keepsake-host --compress zstd"
	deb=$("${root}/packaging/deb/build.sh" --bin "${target}/debug/keepsake-host" --out "${work}" --compress zstd | tail -n 1)
fi
size=$(wc -c <"${deb}")
say "package ${deb} (${size} bytes)"
if dpkg-deb --ctrl-tarfile "${deb}" | tar -t | grep -E 'preinst|postinst|prerm|postrm'; then
	echo "tests/deb/run.sh: the package has maintainer scripts; README.md promises none (purge never touches anyone's data)" >&2
	exit 1
fi

# every path with its type and mode (content is not compared: dpkg's own status file and
# man-db's index change by design)
listing() {
	find /usr /etc /opt /var/lib/dpkg/info -xdev -printf '%y %m %p\n' 2>/dev/null | LC_ALL=C sort
}
listing >"${work}/before.txt"
paths=$(wc -l <"${work}/before.txt")
say "listed ${paths} paths under /usr /etc /opt /var/lib/dpkg/info"

say "dpkg -i"
installed=1
dpkg -i "${deb}"
dpkg-query -W -f='${Status} ${Version}\n' keepsake-host
version=$(/usr/bin/keepsake-host --version)
say "installed: ${version}"

say "doctor and Chromium against the installed package (tests/deb/installed.test.mjs)"
if [ ! -d "${root}/tests/e2e/node_modules/playwright-core" ]; then
	(cd "${root}/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error)
fi
guard=""
if command -v timeout >/dev/null 2>&1; then
	guard="timeout -k 10 300"
fi
# shellcheck disable=SC2086 # $guard is a word list
${guard} node --test --test-timeout=240000 --test-reporter=spec "${here}/installed.test.mjs"

say "dpkg -r (the binary goes, the manifests stay as conffiles until purge)"
dpkg -r keepsake-host >/dev/null
if [ -e /usr/bin/keepsake-host ] || [ -e /usr/share/keepsake ]; then
	echo "tests/deb/run.sh: dpkg -r left /usr/bin/keepsake-host or /usr/share/keepsake" >&2
	exit 1
fi
if [ ! -f /etc/chromium/native-messaging-hosts/dev.keepsake.host.json ]; then
	echo "tests/deb/run.sh: dpkg -r removed a conffile (only purge should)" >&2
	exit 1
fi

say "dpkg --purge"
dpkg --purge keepsake-host >/dev/null
installed=""
if dpkg-query -W keepsake-host >/dev/null 2>&1; then
	echo "tests/deb/run.sh: dpkg still knows keepsake-host after purge" >&2
	exit 1
fi
listing >"${work}/after.txt"
if ! diff -u "${work}/before.txt" "${work}/after.txt" >"${work}/diff.txt"; then
	echo "tests/deb/run.sh: install + purge changed the system (- before, + after):" >&2
	grep '^[-+][^-+]' "${work}/diff.txt" >&2 || true
	exit 1
fi
say "purge left the system as it was (${paths} paths compared); passed"
