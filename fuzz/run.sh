#!/usr/bin/env bash
# Run every fuzz target for SECONDS (default 60), JOBS at a time (default 2), and append one
# summary line per target to fuzz/last-run.txt. Needs a nightly toolchain and cargo-fuzz.
#   fuzz/run.sh [SECONDS]
# Environment: FUZZ_TARGETS (space-separated subset), FUZZ_JOBS, FUZZ_NO_BUILD=1 (use the
# binaries already in fuzz/target), FUZZ_SCRATCH_DIR (new corpus units go there instead of
# fuzz/corpus: keeps the work tree clean), FUZZ_LOG_DIR (default fuzz/logs, not committed),
# KEEPSAKE_FUZZ_SKIP (see fuzz/README.md, "Findings"; passed through), FUZZ_TARGET_DIR (cargo's
# build directory, default fuzz/target), FUZZ_RECORD=0 (print the summary lines without appending
# them to fuzz/last-run.txt, as test.sh does).
# Exits non-zero if any target crashed, ran out of memory or timed out.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

secs=${1:-60}
read -r -a targets <<<"${FUZZ_TARGETS:-frame_decode request_decode image_decode compaction}"
jobs=${FUZZ_JOBS:-2}
log_dir=${FUZZ_LOG_DIR:-fuzz/logs}
target_dir=${FUZZ_TARGET_DIR:-fuzz/target}
record=fuzz/last-run.txt
[ "${FUZZ_RECORD:-1}" = 1 ] || record=/dev/null
mkdir -p "$log_dir"

if [ "${FUZZ_NO_BUILD:-0}" != 1 ] && ! cargo +nightly fuzz build --target-dir "$target_dir" >"$log_dir/build.log" 2>&1; then
	tail -20 "$log_dir/build.log" >&2
	echo "fuzz build failed (log: $log_dir/build.log)" >&2
	exit 1
fi
bin_dir=$target_dir/x86_64-unknown-linux-gnu/release
# ASan keeps freed memory in a quarantine (256 MB by default) that counts toward the RSS limit:
# over a long run it filled up and libFuzzer reported an "out-of-memory" at 541 MB with 27 MB
# live. 64 MB keeps the 512 MB limit about our own allocations.
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=64}

stat_of() { grep -m1 "^stat::$1:" "$2" | awk '{print $2}'; }

run_one() {
	local t=$1 extra=()
	case $t in
	request_decode) extra=(-dict=fuzz/request_decode.dict) ;;
	image_decode) extra=(-max_len=65536) ;;
	compaction) extra=(-max_len=16384) ;;
	*) ;;
	esac
	local log="$log_dir/$t.log"
	local started
	started=$(date +%s)
	# what `cargo fuzz run` does, without rebuilding: grow fuzz/corpus/<t> (or, with
	# FUZZ_SCRATCH_DIR, a scratch directory read before it), crashes to fuzz/artifacts/<t>/
	local dirs=("fuzz/corpus/$t")
	if [ -n "${FUZZ_SCRATCH_DIR:-}" ]; then
		dirs=("$FUZZ_SCRATCH_DIR/$t" "fuzz/corpus/$t")
	fi
	mkdir -p "${dirs[@]}" "fuzz/artifacts/$t"
	# bash's `time` reports the fuzzer's own CPU seconds (user + sys): on a shared machine the
	# wall time overstates the work done
	local TIMEFORMAT='%U %S' rc
	{ time "$bin_dir/$t" -artifact_prefix="fuzz/artifacts/$t/" -max_total_time="$secs" -rss_limit_mb=512 \
		-timeout=10 -print_final_stats=1 "${extra[@]}" "${dirs[@]}" >"$log" 2>&1; } 2>"$log.cpu"
	rc=$?
	local cpu
	cpu=$(awk '{printf "%d", $1 + $2}' "$log.cpu")
	local outcome=ok
	if grep -q "ERROR: libFuzzer: out-of-memory" "$log"; then
		outcome=OOM
	elif grep -q "ERROR: libFuzzer: timeout" "$log"; then
		outcome=TIMEOUT
	elif [ "$rc" -ne 0 ]; then
		outcome="CRASH(rc=$rc)"
	fi
	local artifact
	artifact=$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | sed 's/Test unit written to //')
	local files bytes
	files=$(find "${dirs[@]}" -type f | wc -l)
	bytes=$(find "${dirs[@]}" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	printf '%s %s %ss: %s, execs %s, exec/s %s, new units %s, corpus %s files / %s B, peak RSS %s MB, wall %ss, cpu %ss%s\n' \
		"$(date -u +%Y-%m-%dT%H:%MZ)" "$t" "$secs" "$outcome" \
		"$(stat_of number_of_executed_units "$log")" "$(stat_of average_exec_per_sec "$log")" \
		"$(stat_of new_units_added "$log")" "$files" "$bytes" "$(stat_of peak_rss_mb "$log")" \
		"$(($(date +%s) - started))" "$cpu" "${artifact:+, artifact $artifact}" | tee -a "$record"
	[ "$outcome" = ok ]
}

status=0
pids=()
for t in "${targets[@]}"; do
	run_one "$t" &
	pids+=($!)
	if [ "${#pids[@]}" -ge "$jobs" ]; then
		wait "${pids[0]}" || status=1
		pids=("${pids[@]:1}")
	fi
done
for p in "${pids[@]}"; do
	wait "$p" || status=1
done
exit "$status"
