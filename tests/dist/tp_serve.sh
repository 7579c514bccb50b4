#!/usr/bin/env bash
# `frugal serve --tensor-parallel-size 2` on CPU ranks (Open MPI): rank 0 serves HTTP and sends
# each step's new requests and cancels to rank 1. Checked against a one-rank server on the same
# model: greedy completions (sequential and concurrent) equal; unseeded sampling and a client
# that hangs up mid-stream keep the ranks in step (a later request is still answered, and
# correctly); SIGINT to the launcher stops every rank, rank 1 through rank 0's engine.
set -euo pipefail
frugal=$1 root=$2
export FRUGAL_THREADS=1
model="$root/models/stories260K"
work=$(mktemp -d)
pids=()
cleanup() {  # each server leads its own process group (setsid): its mpirun and ranks go too
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

start() {  # start NAME ARGS...: a server on a free port; its port in $work/NAME.port
  local name=$1
  shift
  setsid "$frugal" serve --model "$model" --port 0 --max-num-seqs 8 "$@" 2>"$work/$name.log" >/dev/null &
  pids+=($!)
  echo $! >"$work/$name.pid"
}
wait_ready() {
  for _ in $(seq 1 600); do
    if grep -q "listening on http://" "$work/$1.log"; then
      sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$work/$1.log" | head -1 >"$work/$1.port"
      return 0
    fi
    sleep 0.1
  done
  echo "server $1 did not start:"; cat "$work/$1.log"; exit 1
}

start one
start tp2 --tensor-parallel-size 2
wait_ready one
wait_ready tp2

python3 - "$(cat "$work/one.port")" "$(cat "$work/tp2.port")" <<'EOF'
import json, sys, threading, urllib.request, http.client

one, tp2 = int(sys.argv[1]), int(sys.argv[2])
MODEL = "stories260K"

def complete(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)["choices"][0]["text"]

prompts = [[1, 403, 407], [1, 365, 141, 397], [1, 43, 297, 370, 166, 319]]
greedy = lambda p, n=24: {"model": MODEL, "prompt": p, "max_tokens": n, "temperature": 0}
want = [complete(one, greedy(p)) for p in prompts]
assert all(want), f"one-rank server returned empty text: {want}"

# Sequential, then all at once (one batch on both ranks).
got = [complete(tp2, greedy(p)) for p in prompts]
assert got == want, f"tp=2 sequential {got!r} != one rank {want!r}"
conc = [None] * len(prompts)
def worker(i):
    conc[i] = complete(tp2, greedy(prompts[i]))
ts = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
[t.start() for t in ts]
[t.join() for t in ts]
assert conc == want, f"tp=2 concurrent {conc!r} != one rank {want!r}"

# Sampling without a seed (rank 0 picks one for both ranks; else they would diverge and hang),
# and with one: the same seed gives the same text.
unseeded = complete(tp2, {"model": MODEL, "prompt": prompts[0], "max_tokens": 32, "temperature": 1.0})
a = complete(tp2, {"model": MODEL, "prompt": prompts[1], "max_tokens": 24, "temperature": 0.9, "seed": 7})
b = complete(tp2, {"model": MODEL, "prompt": prompts[1], "max_tokens": 24, "temperature": 0.9, "seed": 7})
assert a == b, f"seeded sampling differs between two requests: {a!r} / {b!r}"

# A client that hangs up mid-stream: the request is cancelled on both ranks.
c = http.client.HTTPConnection("127.0.0.1", tp2, timeout=60)
c.request("POST", "/v1/completions", body=json.dumps({"model": MODEL, "prompt": prompts[2], "max_tokens": 200,
                                                        "temperature": 0, "stream": True, "ignore_eos": True}),
          headers={"Content-Type": "application/json"})
r = c.getresponse()
assert r.status == 200, r.status
r.readline()
c.close()

again = [complete(tp2, greedy(p)) for p in prompts]
assert again == want, f"after a cancel, tp=2 {again!r} != one rank {want!r}"
print("ok:", json.dumps(want[0]))
EOF

kill -INT "$(cat "$work/tp2.pid")"
for _ in $(seq 1 300); do
  kill -0 "$(cat "$work/tp2.pid")" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$(cat "$work/tp2.pid")" 2>/dev/null; then echo "tp=2 server still running 30 s after SIGINT"; cat "$work/tp2.log"; exit 1; fi
# Every rank stops in order: rank 0 on the signal, rank 1 when rank 0's engine tells it. (The
# launcher's exit code is mpirun's, which Open MPI makes 1 for a job it was signalled to stop.)
grep -q "SIGTERM, shutting down\|SIGINT, shutting down" "$work/tp2.log" || { echo "rank 0 did not shut down"; cat "$work/tp2.log"; exit 1; }
grep -q "rank 1 stopped with rank 0" "$work/tp2.log" || { echo "rank 1 did not stop cleanly"; cat "$work/tp2.log"; exit 1; }
if kill -0 -- "-$(cat "$work/tp2.pid")" 2>/dev/null; then echo "ranks left running"; exit 1; fi
kill -INT "$(cat "$work/one.pid")"
echo "ok: serve with 2 ranks answers as one rank, survives a cancel and stops on SIGINT"
