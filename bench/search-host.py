#!/usr/bin/env python3
"""Scenario 8 outside the browser: time `sessions.list {query}` against one keepsake-host over its
pipes (4-byte native-endian length + UTF-8 JSON), for profiling the host's search on its own.

  node -e "import('./bench/inputs.mjs').then(m => m.writeSessionsExport('/tmp/s8/doc.json',
      {seed: 31, count: 1000, chars: 100000}))"           # the bench's 1,000 x 100K-char sessions
  target/release/keepsake-host --db /tmp/s8/keepsake.db import /tmp/s8/doc.json
  python3 bench/search-host.py /tmp/s8/keepsake.db 60 鲸   # prints hits, reply bytes, p50 round trip
  PRE="valgrind --tool=callgrind --callgrind-out-file=/tmp/s8/cg.out" \\
      python3 bench/search-host.py /tmp/s8/keepsake.db 20 鲸   # instructions per query: callgrind_annotate

The host's own time per query is the `served op=sessions.list … us=` line of keepsake-host.log
beside the database (KEEPSAKE_LOG=debug is set here). BIN picks the binary (default: the release
build).
"""
import json
import os
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("BIN", os.path.join(ROOT, "target", "release", "keepsake-host"))
ORIGIN = "chrome-extension://ejaedcjldiggibmnammkkoekohjgefkk/"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    db = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    query = sys.argv[3] if len(sys.argv) > 3 else "鲸"
    pre = os.environ.get("PRE", "").split()
    env = {**os.environ, "KEEPSAKE_DB": db, "KEEPSAKE_LOG": "debug"}
    host = subprocess.Popen(pre + [BIN, ORIGIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def call(i, op, args):
        body = json.dumps({"id": i, "op": op, "args": args}).encode()
        host.stdin.write(struct.pack("=I", len(body)) + body)
        host.stdin.flush()
        while True:
            size = struct.unpack("=I", host.stdout.read(4))[0]
            reply = json.loads(host.stdout.read(size))
            if "event" not in reply:
                if not reply.get("ok") or "chunk" in reply:
                    sys.exit(f"{op}: {json.dumps(reply)[:300]}")
                return reply["result"], size

    call(0, "host.hello", {})
    times = []
    for i in range(n):
        t = time.perf_counter()
        rows, size = call(i + 1, "sessions.list", {"query": query})
        times.append(time.perf_counter() - t)
    times.sort()
    print(f"{query!r}: {len(rows)} hits, reply {size} bytes, round trip p50 {times[len(times) // 2] * 1000:.2f} ms over {n}")
    host.stdin.close()
    host.wait()


if __name__ == "__main__":
    main()
