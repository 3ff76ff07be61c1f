#!/usr/bin/env bash
# scripts/bench-ab.sh [REV]: convert throughput and peak RSS of prep built
# at git revision REV (A; default: the merge base with main, else HEAD~1)
# against the working tree (B), on the bench inputs and plans of make bench
# (bench/cmd/benchrun: world size 8, global batch 8192, global shuffle,
# --jobs 2), alternated A B / B A, BENCH_AB_RUNS (default 7) measured runs
# each after one warm-up (scripts/abrun). Prints a Markdown table; B/A
# below 1 means B is faster or smaller.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
REV=${1:-$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD~1)}
RUNS=${BENCH_AB_RUNS:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/a-src"
git archive "$REV" | tar -x -C "$work/a-src"
(cd "$work/a-src" && $GO build -o "$work/prep-a" ./cmd/prep)
$GO build -o "$work/prep-b" ./cmd/prep
$GO build -o "$work/abrun" ./scripts/abrun
(cd bench && $GO build -o "$work/gendata" ./cmd/gendata)
"$work/gendata" -dir .cache/bench/data >&2

cat >"$work/spec-req.yaml" <<'YAML'
tensors:
  - {name: id, column: id, dtype: I64}
  - {name: feat, columns: [f0, f1, f2, f3, f4, f5, f6, f7], dtype: F32}
  - {name: emb, column: emb, dtype: F32, shape: [16]}
  - {name: label, column: label, dtype: I64, bytes: {mode: hash, buckets: 1000}}
YAML
cat >"$work/spec-opt.yaml" <<'YAML'
tensors:
  - {name: id, column: id, dtype: I64}
  - {name: feat, columns: [f0, f1, f2, f3, f4, f5, f6, f7], dtype: F32, nulls: {fill: 0}}
  - {name: emb, column: emb, dtype: F32, shape: [16]}
  - {name: label, column: label, dtype: I64, bytes: {mode: hash, buckets: 1000}}
YAML
for in in req-plain-snappy opt-dict-zstd; do
	"$work/prep-b" plan --source ".cache/bench/data/$in.parquet" --seed 1 --epochs 1 --global-batch 8192 \
		--world-size 8 --workers 1 --shuffle global --remainder drop -o "$work/plan-$in.json" -q >/dev/null
done

echo "A = \`$(git rev-parse --short "$REV")\`, B = working tree at \`$(git rev-parse --short HEAD)\`$(git diff --quiet HEAD -- . || echo ' (modified)'); $RUNS alternated runs each after one warm-up; median (min–max)."
echo
echo "| command | wall A | wall B | B/A | CPU A | CPU B | B/A | peak RSS A | peak RSS B | B/A |"
echo "|---|---|---|---|---|---|---|---|---|---|"
ab() { # ab LABEL ARGS...
	local label=$1
	shift
	"$work/abrun" -runs "$RUNS" -out "$work" -label "$label" "$work/prep-a" "$work/prep-b" "$@"
}
ab "convert req-plain-snappy --jobs 2" convert --plan "$work/plan-req-plain-snappy.json" --spec "$work/spec-req.yaml" --jobs 2 -q
ab "convert opt-dict-zstd --jobs 2" convert --plan "$work/plan-opt-dict-zstd.json" --spec "$work/spec-opt.yaml" --jobs 2 -q
ab "convert req-plain-snappy --jobs 2 --memory-limit 64MiB (spilled)" convert --plan "$work/plan-req-plain-snappy.json" --spec "$work/spec-req.yaml" --jobs 2 --memory-limit 64MiB -q
