#!/usr/bin/env python3
"""Times a command from its start to the first byte it writes on stdout (time to first token
for `frugal run`, which streams), and to its exit. usage: ttft.py CMD ARGS..."""
import subprocess
import sys
import time

t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
first = p.stdout.read(1)
t1 = time.monotonic()
rest = p.stdout.read()
err = p.stderr.read()
p.wait()
t2 = time.monotonic()
sys.stderr.write(err.decode(errors="replace")[-2000:])
print(f"first output byte after {t1 - t0:.3f} s, exit after {t2 - t0:.3f} s, rc {p.returncode}, "
      f"output {(first + rest)[:200]!r}")
