#!/usr/bin/env bash
# The main job end to end on bundled real data:
#   prep plan -> prep convert -> prep verify --deep -> gpuload host reader.
# Data: testdata/ml/venomx/embeddings.parquet (100 rows, written by Arrow
# C++/pyarrow 15: OPTIONAL int32 id, string name, LIST<FLOAT> of 50,
# MAP<STRING, STRING> metadata), BSD-3; then the metadata map as jagged
# tensors (features-jagged.yaml) through the same steps.
# Exits non-zero if any step fails. Output goes to a temporary directory
# (kept with DEMO_KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."
PREP="${PREP:-./bin/prep}"
work="$(mktemp -d "${TMPDIR:-/tmp}/prep-demo.XXXXXX")"
if [[ "${DEMO_KEEP:-0}" != 1 ]]; then trap 'rm -rf "$work"' EXIT; fi
src=testdata/ml/venomx/embeddings.parquet
spec=testdata/ml/venomx/features.yaml

step() { printf '\n== %s\n' "$*"; }

step "plan: 2 epochs, global batch 16 over 2 ranks x 2 workers, seeded global shuffle"
"$PREP" plan --source "$src" --seed 7 --epochs 2 --global-batch 16 --world-size 2 \
	--workers 2 --shuffle global --remainder pad -o "$work/plan.json"

step "convert: decode once, write one shard per (epoch, rank)"
"$PREP" convert --plan "$work/plan.json" --spec "$spec" -o "$work/shards"

step "verify: structure, checksums, plan order and every value against the source"
"$PREP" verify --deep "$work/shards"   # checks against the shard set's own plan.json
"$PREP" verify --deep --json -q "$work/shards" >"$work/verify.json"

step "inspect: the shard set"
"$PREP" inspect "$work/shards"

step "load: epoch 0, rank 0 through the gpuload host reader"
"$PREP" load "$work/shards" --epoch 0 --rank 0 --verify-checksums
for r in 0 1; do
	"$PREP" load "$work/shards" --epoch 0 --rank "$r" --verify-checksums --json -q >"$work/load-$r.json"
done

step "export: the first batch of epoch 0, rank 0 as .npy"
"$PREP" export "$work/shards" --epoch 0 --rank 0 --step 0 -o "$work/batch0"
ls -l "$work/batch0"

step "jagged: the metadata map as jagged tensors (shard format 2.0), converted, verified against the source, loaded and exported"
"$PREP" convert --plan "$work/plan.json" --spec testdata/ml/venomx/features-jagged.yaml -o "$work/jagged"
"$PREP" verify --deep --json -q "$work/jagged" >"$work/verify-jagged.json"
"$PREP" load "$work/jagged" --epoch 0 --rank 0 --verify-checksums --json -q >"$work/load-jagged.json"
"$PREP" export "$work/jagged" --epoch 0 --rank 0 --step 0 -o "$work/jagged0"
ls -l "$work/jagged0"

# field NAME FILE: a number or boolean field of a prep --json object.
field() { grep -o "\"$1\": *[^,}]*" "$2" | head -1 | sed 's/.*: *//'; }
printf '\n== summary\n'
printf '  %-28s %s\n' "source" "$src (100 rows)"
printf '  %-28s %s\n' "plan" "2 epochs x 2 ranks, 7 steps per epoch, fingerprint $(field plan_fingerprint "$work/shards/manifest.json" | tr -d '"' | cut -c1-19)..."
printf '  %-28s %s shards, %s batches, %s bytes checked\n' "verify --deep" "$(field shards "$work/verify.json")" "$(field batches "$work/verify.json")" "$(field bytes "$work/verify.json")"
printf '  %-28s ok=%s, %s findings, %s batches compared with the source\n' "verify result" "$(field ok "$work/verify.json")" "$(field finding_count "$work/verify.json")" "$(field deep_batches "$work/verify.json")"
for r in 0 1; do
	printf '  %-28s %s samples (%s pad) in %s batches, %s bytes, %s GB/s\n' "load epoch 0 rank $r (host)" \
		"$(field samples "$work/load-$r.json")" "$(field pad_samples "$work/load-$r.json")" "$(field batches "$work/load-$r.json")" \
		"$(field bytes "$work/load-$r.json")" "$(field gb_per_s "$work/load-$r.json" | cut -c1-5)"
done
printf '  %-28s format %s, ok=%s, %s findings, %s batches compared; loaded %s samples in %s batches\n' "jagged (metadata map)" \
	"$(field shard_format "$work/jagged/manifest.json" | tr -d '"')" "$(field ok "$work/verify-jagged.json")" "$(field finding_count "$work/verify-jagged.json")" \
	"$(field deep_batches "$work/verify-jagged.json")" "$(field samples "$work/load-jagged.json")" "$(field batches "$work/load-jagged.json")"
printf '\ndemo: all steps passed (output in %s%s)\n' "$work" "$([[ "${DEMO_KEEP:-0}" == 1 ]] && echo '' || echo ', removed on exit')"
