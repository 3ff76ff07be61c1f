#!/usr/bin/env bash
# Regenerates testdata/shards/spec-v1: a shard set written by prep before
# spec hash version 2 (commit b8ac83d, spec hash "sha256:<hex>" over the Go
# struct field order). The tests check that today's convert resumes it and
# verify --deep accepts it. Run from the repository root; needs git and go.
set -euo pipefail
REV=${REV:-b8ac83dcc82b5a237e5e76aac20b3f33dac2d142}
D=testdata/shards/spec-v1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$REV" | tar -x -C "$tmp"
(cd "$tmp" && go build -o prep ./cmd/prep)
mkdir -p "$tmp/gen" && cp "$D/gen/main.go" "$tmp/gen/"
(cd "$tmp" && go run ./gen "$tmp/d.parquet")
rm -rf "$D/src" "$D/out" && mkdir -p "$D/src"
cp "$tmp/d.parquet" "$D/src/d.parquet"
"$tmp/prep" plan --source "$D/src" --seed 3 --epochs 2 --global-batch 8 --world-size 2 \
  --workers 1 --shuffle global --remainder pad -o "$D/plan.json" -q
"$tmp/prep" convert --plan "$D/plan.json" --spec "$D/spec.yaml" -o "$D/out" -q
