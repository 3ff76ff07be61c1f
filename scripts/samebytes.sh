#!/usr/bin/env bash
# scripts/samebytes.sh [REV]: behaviour unchanged. Builds prep at git
# revision REV (default: the merge base with main, else HEAD~1) and from the
# working tree, converts the bench plans and every field case with both, and
# compares the shard sets with scripts/shardcmp: every shard's data blocks,
# batch table and sample ids must be byte-identical (the spec hash, tool
# version and the metadata they enter may differ). A refused conversion must
# be refused by both builds with the same exit code.
#
# The bench inputs come from bench/cmd/gendata (cached under .cache/bench,
# as for make bench); SAMEBYTES_BENCH=0 skips them. Exit 0 when everything
# matches, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
REV=${1:-$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD~1)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "samebytes: old = $(git rev-parse --short "$REV"), new = working tree" >&2
mkdir -p "$work/old-src"
git archive "$REV" | tar -x -C "$work/old-src"
(cd "$work/old-src" && $GO build -o "$work/prep-old" ./cmd/prep)
$GO build -o "$work/prep-new" ./cmd/prep
$GO build -o "$work/shardcmp" ./scripts/shardcmp

fail=0
checked=0
# run NAME PLAN SPEC [convert flags...]: convert with both builds, compare.
run() {
	local name=$1 plan=$2 spec=$3
	shift 3
	local o="$work/out/$name"
	rm -rf "$o" && mkdir -p "$o"
	local ra=0 rb=0
	"$work/prep-old" convert --plan "$plan" --spec "$spec" -o "$o/old" -q "$@" >/dev/null 2>"$o/old.err" || ra=$?
	"$work/prep-new" convert --plan "$plan" --spec "$spec" -o "$o/new" -q "$@" >/dev/null 2>"$o/new.err" || rb=$?
	checked=$((checked + 1))
	if [ "$ra" != "$rb" ]; then
		echo "DIFF $name: exit $ra (old) vs $rb (new)"
		sed 's/^/  old: /' "$o/old.err" | head -3
		sed 's/^/  new: /' "$o/new.err" | head -3
		fail=1
	elif [ "$ra" != 0 ]; then
		echo "same $name: both refused (exit $ra)"
	elif out=$("$work/shardcmp" "$o/old" "$o/new"); then
		echo "same $name: $out"
	else
		echo "DIFF $name:"
		echo "$out" | head -20 | sed 's/^/  /'
		fail=1
	fi
	rm -rf "$o/old" "$o/new"
}

# Field cases: every spec of test/cases/testdata/<case>/, on the case's
# Parquet files, under a shuffled two-rank plan with pads and under a
# one-rank source-order plan.
for dir in testdata/cases/B*/; do
	c=$(basename "$dir")
	specs=(test/cases/testdata/"$c"/*.yaml)
	[ -e "${specs[0]}" ] || continue
	ls "$dir"*.parquet >/dev/null 2>&1 || continue
	src="$work/src/$c"
	mkdir -p "$src"
	cp "$dir"*.parquet "$src/"
	for layout in shuffled ordered; do
		plan="$work/plan-$c-$layout.json"
		if [ $layout = shuffled ]; then
			args=(--seed 5 --epochs 2 --global-batch 4 --world-size 2 --shuffle global --remainder pad)
		else
			args=(--global-batch 3 --shuffle none --remainder partial)
		fi
		if ! "$work/prep-new" plan --source "$src" "${args[@]}" -o "$plan" -q >/dev/null 2>&1; then
			echo "skip $c/$layout: no plan (the case's files are refused by plan)"
			continue
		fi
		for spec in "${specs[@]}"; do
			run "$c/$layout/$(basename "$spec" .yaml)" "$plan" "$spec" --jobs 2
		done
	done
done

# Bench plans (benchrun's planArgs and specs), in memory and spilled.
if [ "${SAMEBYTES_BENCH:-1}" != 0 ]; then
	(cd bench && $GO build -o "$work/gendata" ./cmd/gendata)
	"$work/gendata" -dir .cache/bench/data >&2
	cat >"$work/spec-req.yaml" <<'EOF'
tensors:
  - {name: id, column: id, dtype: I64}
  - {name: feat, columns: [f0, f1, f2, f3, f4, f5, f6, f7], dtype: F32}
  - {name: emb, column: emb, dtype: F32, shape: [16]}
  - {name: label, column: label, dtype: I64, bytes: {mode: hash, buckets: 1000}}
EOF
	cat >"$work/spec-opt.yaml" <<'EOF'
tensors:
  - {name: id, column: id, dtype: I64}
  - {name: feat, columns: [f0, f1, f2, f3, f4, f5, f6, f7], dtype: F32, nulls: {fill: 0}}
  - {name: emb, column: emb, dtype: F32, shape: [16]}
  - {name: label, column: label, dtype: I64, bytes: {mode: hash, buckets: 1000}}
EOF
	for in in req-plain-snappy opt-dict-zstd; do
		plan="$work/plan-$in.json"
		"$work/prep-new" plan --source ".cache/bench/data/$in.parquet" --seed 1 --epochs 1 --global-batch 8192 \
			--world-size 8 --workers 1 --shuffle global --remainder drop -o "$plan" -q >/dev/null
		spec="$work/spec-req.yaml"
		[[ $in == opt-* ]] && spec="$work/spec-opt.yaml"
		run "bench/$in" "$plan" "$spec" --jobs 2
		run "bench/$in-spilled" "$plan" "$spec" --jobs 2 --memory-limit 64MiB
	done
fi

echo "samebytes: $checked conversions compared" >&2
exit $fail
