#!/bin/sh
# Keepsake installer (Linux and macOS): builds the release binary, installs it for this user and
# registers it with every detected Chromium-family browser. All registration logic lives in
# `keepsake-host install` (tested in Rust); this script only builds, copies and calls it.
#
#   ./install.sh [--no-build] [--system] [--user-data-dir DIR]... [--extension-id ID]...
#   ./install.sh --uninstall [--system] [--purge-data]
#
# --no-build uses $KEEPSAKE_HOST_BIN, else an existing target/release/keepsake-host.
# The binary goes to ${KEEPSAKE_BIN_DIR:-$HOME/.local/bin}. Running it twice changes nothing.
# System-wide: cargo build --release --locked, then
#   sudo KEEPSAKE_BIN_DIR=/usr/local/bin ./install.sh --no-build --system
set -eu

EXTENSION_ID=ejaedcjldiggibmnammkkoekohjgefkk

main() {
	repo=$(cd "$(dirname "$0")" && pwd)
	bin_dir=${KEEPSAKE_BIN_DIR:-${HOME}/.local/bin}
	case ${bin_dir} in
	/*) ;;
	*) bin_dir=$(pwd)/${bin_dir} ;;
	esac
	dst=${bin_dir}/keepsake-host
	build=1
	uninstall=0
	# Keep our own options; everything else goes to `keepsake-host install|uninstall`.
	n=$#
	i=0
	while [ "${i}" -lt "${n}" ]; do
		arg=$1
		shift
		case ${arg} in
		--no-build) build=0 ;;
		--uninstall) uninstall=1 ;;
		-h | --help)
			sed -n '2,12p' "$0"
			exit 0
			;;
		*) set -- "$@" "${arg}" ;;
		esac
		i=$((i + 1))
	done

	if [ "${uninstall}" -eq 1 ]; then
		host=${dst}
		if [ ! -x "${host}" ]; then
			host=${KEEPSAKE_HOST_BIN:-${repo}/target/release/keepsake-host}
		fi
		if [ ! -x "${host}" ]; then
			die "no keepsake-host binary found (looked at ${dst}); set KEEPSAKE_HOST_BIN"
		fi
		echo "==> unregistering keepsake-host"
		"${host}" uninstall "$@"
		# (`uninstall` removes the binary its receipt names once it proves to be keepsake-host;
		# this catches a copy installed without a receipt, never a link or a folder.)
		if [ -f "${dst}" ] && [ ! -L "${dst}" ]; then
			rm -f "${dst}"
			echo "removed   ${dst}"
		fi
		echo "==> done"
		return 0
	fi

	if [ "${build}" -eq 1 ]; then
		need_cmd cargo
		echo "==> building keepsake-host (release)"
		(cd "${repo}" && cargo build --release --locked)
		src=${repo}/target/release/keepsake-host
	else
		src=${KEEPSAKE_HOST_BIN:-${repo}/target/release/keepsake-host}
	fi
	if [ ! -f "${src}" ] || [ ! -x "${src}" ]; then
		die "${src} is not an executable file (build it, or set KEEPSAKE_HOST_BIN)"
	fi

	# Remember the folders we create, so `install.sh --uninstall` can remove them again.
	d=${bin_dir}
	while [ ! -d "${d}" ]; do
		set -- "$@" --created-dir "${d}"
		d=$(dirname "${d}")
	done
	mkdir -p "${bin_dir}"
	if cmp -s "${src}" "${dst}"; then
		echo "unchanged ${dst}"
	else
		# Copy beside the target, then rename: a running host keeps its old file.
		cp "${src}" "${dst}.tmp.$$"
		chmod 0755 "${dst}.tmp.$$"
		mv -f "${dst}.tmp.$$" "${dst}"
		echo "installed ${dst}"
	fi

	echo "==> registering with your browsers"
	"${dst}" install --bin "${dst}" --owns-bin "$@"

	# the commands below (and the README's) name keepsake-host: say how to reach it when
	# ${bin_dir} is not on PATH (Debian puts ~/.local/bin there only when it exists at login)
	khost=keepsake-host
	case ":${PATH}:" in
	*":${bin_dir}:"*) ;;
	*)
		khost=${dst}
		cat <<PATHMSG

note: ${bin_dir} is not on your PATH yet, so "keepsake-host" alone is not found in this shell.
  Add it for new shells:   echo 'export PATH="${bin_dir}:\$PATH"' >> ~/.profile
  Or use the full path:    ${dst}
PATHMSG
		;;
	esac
	cat <<MSG

Next steps: load the extension
  1. Open chrome://extensions (edge://extensions, brave://extensions, vivaldi://extensions)
  2. Turn on Developer mode
  3. Load unpacked -> ${repo}/extension
  The extension ID will be ${EXTENSION_ID} (fixed by the key in extension/manifest.json).
  Firefox: node scripts/firefox.mjs, then about:debugging -> Load Temporary Add-on ->
  ${repo}/dist/firefox/manifest.json (README "Firefox").
  Check the setup any time with: ${khost} doctor
  Remove it again with: ./install.sh --uninstall   (keeps your chat data)
MSG
}

need_cmd() {
	if ! command -v "$1" >/dev/null 2>&1; then
		die "'$1' is required (install Rust from https://rustup.rs)"
	fi
}

die() {
	echo "install.sh: $*" >&2
	exit 1
}

main "$@"
