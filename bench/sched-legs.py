#!/usr/bin/env python3
"""Scenario 8's slow round trips under the scheduler's eye: who ran while a reply waited.

  perf record -a -k mono -e sched:sched_switch -e sched:sched_wakeup -o /tmp/s8.data -- sleep 70 &
  BENCH_DUMP=1 BENCH_ONLY=search ./bench.sh      # logs "… written to DIR (bench/sched-legs.py)"
  perf script -i /tmp/s8.data > /tmp/s8.txt
  python3 bench/sched-legs.py /tmp/s8.txt DIR

DIR holds samples.json (every search sample with its worker times `at0`/`at1`, epoch ms), host.log
and pids.json. perf's clock is CLOCK_MONOTONIC; the worker's is the wall clock: run this soon after
the capture (the offset between the two is read now, and the clock must not have been stepped).

Prints, per way (keepsake, floor = echo host replay, spun = busy echo host) and query: round trips
matched to a host wakeup, how many took over 3 ms, and in how many the browser's Chrome_IOThread
ran over 1 ms without a switch after the host's last wakeup (while the thread that reads the pipe,
woken onto the same CPU, waits). Then the browser's Chrome_IOThread: its runs over 1 ms, their spacing, and how
often such a run followed a wakeup by keepsake-host or by the echo host.
"""
import bisect
import collections
import json
import os
import re
import statistics
import sys
import time

LINE = re.compile(r"\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+): (.*)")


def load(perf_txt):
    ev = []
    with open(perf_txt, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                ev.append((float(m.group(4)), m.group(1), int(m.group(2)), int(m.group(3)), m.group(5), m.group(6)))
    ev.sort()
    return ev


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ev = load(sys.argv[1])
    dump = sys.argv[2]
    samples = json.load(open(os.path.join(dump, "samples.json")))
    host = json.load(open(os.path.join(dump, "pids.json")))["host"]
    offset = time.time() - time.monotonic()
    ts = [e[0] for e in ev]
    echo = next((e[2] for e in ev if e[1] == "echo_host"), -1)

    # the browser IO thread: its long runs and what woke it before each
    io_tid = collections.Counter(e[2] for e in ev if e[1] == "Chrome_IOThread").most_common(1)
    io = str(io_tid[0][0]) if io_tid else "-1"
    start, runs, last_wake = {}, [], None
    for t, comm, _tid, cpu, name, tr in ev:
        if name == "sched:sched_wakeup" and f"pid={io} " in tr + " ":
            last_wake = comm
        if name == "sched:sched_switch":
            m = re.search(r"next_pid=(\d+)", tr)
            if cpu in start and start[cpu][0] == io:
                runs.append((start[cpu][1], t - start[cpu][1], start[cpu][2]))
            start[cpu] = (m.group(1), t, last_wake)
    print("way       query  matched  rt>3ms  IO thread ran >1 ms after the host's write")
    for way, tid in (("keepsake", host), ("floor", echo), ("spun", echo)):
        for q, by_way in samples.items():
            matched = slow = waited = 0
            for x in by_way.get(way, []):
                if "at0" not in x:
                    continue
                a0, a1 = x["at0"] / 1000 - offset, x["at1"] / 1000 - offset
                wakes = [e for e in ev[bisect.bisect_left(ts, a0) : bisect.bisect_right(ts, a1)]
                         if e[2] == tid and e[4] == "sched:sched_wakeup"]
                if not wakes:
                    continue
                matched += 1
                slow += x["ms"] > 3
                tw = wakes[-1][0]
                waited += any(tw <= r[0] <= a1 and r[1] > 0.001 for r in runs)
            print(f"{way:9} {q:6} {matched:7} {slow:7} {waited:7}")

    long = [r for r in runs if r[1] > 0.001]
    if not runs:
        return
    print(f"\nChrome_IOThread ({io}): {len(runs)} runs, {len(long)} over 1 ms", end="")
    if len(long) > 1:
        gaps = [(b[0] - a[0]) * 1000 for a, b in zip(long, long[1:])]
        print(f", median {statistics.median(r[1] * 1000 for r in long):.1f} ms, median spacing {statistics.median(gaps):.0f} ms")
    else:
        print()
    for who in ("keepsake-host", "echo_host"):
        after = [r for r in runs if r[2] == who]
        print(f"  after a wakeup by {who}: {sum(1 for r in after if r[1] > 0.001)} of {len(after)} runs over 1 ms")


if __name__ == "__main__":
    main()
