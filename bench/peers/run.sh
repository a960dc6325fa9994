#!/usr/bin/env bash
# The peer table: a scratch copy of ../shared/bench-peers with this checkout's adapter in it.
#   bench/peers/run.sh                 the full run (about 10 minutes on 2 quiet cores)
#   QUICK=1 bench/peers/run.sh         small sizes, one run each: checks the set-up only
#   ONLY="floor alkstore" bench/peers/run.sh   some systems only (names as in run_all.sh)
# The report is printed and kept in the scratch copy's results/; docs/benchmarks.md records it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
harness=${PEERS_HARNESS:-$root/../shared/bench-peers}
scratch=${PEERS_SCRATCH:-$(mktemp -d)}
cp -r "$harness" "$scratch/"
cd "$scratch/bench-peers"
cp "$root/bench/peers/bench_alkstore.py" bench_alkstore.py
# The async runtime and the prefetching worker (pgqueuer's default consumer's counterpart) are
# rows of their own, after the sync one; one module runs all three.
grep -q -- --runtime=async run_all.sh ||
  sed -i 's/^run alkstore  *bench_alkstore.py$/&\nrun alkstore_async      bench_alkstore.py --runtime=async\nrun alkstore_prefetch   bench_alkstore.py --batch=10 --metrics C/' run_all.sh
if [[ ! -x .venv-peers/bin/python ]]; then
  python3 -m venv .venv-peers
  .venv-peers/bin/pip install -q 'psycopg[binary]' psycopg-pool 'procrastinate==3.10.*' 'pgqueuer==1.6.*' \
    'chancy==0.26.*' asyncpg "$root"
fi
export ALKSTORE_REV=${ALKSTORE_REV:-$(git -C "$root" rev-parse --short HEAD)}
if [[ -n "${ONLY:-}" ]]; then
  # run_all.sh runs every system; keep the lines of the ones asked for (and the report).
  pattern=$(printf '^run %s |' $ONLY)
  grep -Ev '^run ' run_all.sh > run_only.sh
  awk -v keep="${pattern%|}" '$0 ~ keep' run_all.sh > runs.txt
  sed -i "/^start=/r runs.txt" run_only.sh
  bash run_only.sh
else
  bash run_all.sh
fi
echo "scratch copy: $scratch/bench-peers" >&2
