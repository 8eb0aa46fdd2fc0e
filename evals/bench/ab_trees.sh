#!/bin/bash
# A/B of the whole tree against an earlier commit, in one time window (issue 14's benches on a
# noisy shared machine): the commit is checked out in a worktree with its own native build, and
# the two trees' runs alternate.  Not a test.
#
#   evals/bench/ab_trees.sh BASE ROUNDS maskbench SPLIT LIMIT   # ours only: compile p50 | p99 | mask mean | mask p50
#   evals/bench/ab_trees.sh BASE ROUNDS e2e                     # e2e --prompts 30: × free per mode
#
# Run from the repository root with the project's venv (.venv) and, for maskbench, PY set to
# the interpreter that has the peers installed if it is not .venv's.
set -euo pipefail
base=$1; rounds=$2; what=$3
here=$(pwd)
py=${PY:-$here/.venv/bin/python}
wt=$(mktemp -d /tmp/ab_trees.XXXXXX)
trap 'git -C "$here" worktree remove --force "$wt" >/dev/null 2>&1 || true' EXIT
git -C "$here" worktree add --detach "$wt" "$base" >/dev/null
ln -sfn "$here/../shared" "$(dirname "$wt")/shared" 2>/dev/null || true   # (tests and benches read ../shared)
(cd "$wt" && "$here/.venv/bin/python" setup.py build_ext --inplace -q >/dev/null)
for i in $(seq 1 "$rounds"); do
  for t in base head; do
    d=$here; [ "$t" = base ] && d=$wt
    if [ "$what" = maskbench ]; then
      out=$(cd "$d" && PYTHONPATH=. "$py" -m evals.bench.maskbench --vocab llama-bpe --split "$4" --limit "$5" \
            --engines ours --no-write 2>/dev/null | grep '^| ours' | head -1 | cut -d'|' -f5-8)
    else
      out=$(cd "$d" && PYTHONPATH=. "$here/.venv/bin/python" -m evals.bench.e2e --prompts 30 2>/dev/null \
            | grep '^| \(free\|processor\|fast-fwd\) ' | awk -F'|' '{printf "%s %s  ", $2, $6}')
    fi
    echo "$t $i $out"
  done
done
