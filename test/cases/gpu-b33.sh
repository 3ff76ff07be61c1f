#!/usr/bin/env bash
# gpu-b33.sh: field case B33 (truncated shard, bounded reader memory) on the
# CUDA backend of prep load. Needs an NVIDIA GPU and its driver; the CPU
# paths are covered by `go test ./test/cases`.
#
# Usage: test/cases/gpu-b33.sh PREP_BINARY [KiB of padded bytes per sample, default 512 -> ~3 GiB shard]
# Prints one line per check; "SIGBUS" in the output (exit 135) is a failure.
set -u
P=$(readlink -f "$1")
KIB=${2:-512}
cd "$(dirname "$0")/../.."
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail=0
check() { # name expected(ok|fail|any) rc; a Go crash report in $D/err fails
	local verdict=PASS
	if grep -qE "SIGBUS|fatal error|^panic" "$D/err" 2>/dev/null; then verdict="FAIL (crashed: $(grep -m1 -E 'SIGBUS|fatal error|^panic' "$D/err"))"; fail=1
	elif [ "$3" -ge 128 ]; then verdict="FAIL (signal $(($3 - 128)))"; fail=1
	elif [ "$2" = ok ] && [ "$3" -ne 0 ]; then verdict="FAIL (exit $3)"; fail=1
	elif [ "$2" = fail ] && [ "$3" -eq 0 ]; then verdict="FAIL (exit 0)"; fail=1; fi
	echo "$verdict  $1 (exit $3)"
}
peak() { # run a command, print its VmHWM in MiB when it ends
	"$@" >"$D/peak.out" 2>&1 &
	local pid=$! hwm=0 v
	while kill -0 $pid 2>/dev/null; do
		v=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null)
		[ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
		sleep 0.005
	done
	wait $pid
	local rc=$?
	echo "$((hwm / 1024))" >"$D/peak.mib"
	return $rc
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

# A small shard set (B29's data) with one shard cut short.
mkdir "$D/src"
cp testdata/cases/B29-order-stability/*.parquet "$D/src/"
echo 'tensors: [{name: id, column: id, dtype: I64}, {name: x, column: x, dtype: F32}]' >"$D/spec.yaml"
"$P" plan --source "$D/src" --seed 1 --global-batch 20 --world-size 2 -o "$D/plan.json" -q >/dev/null
"$P" convert --plan "$D/plan.json" --spec "$D/spec.yaml" -o "$D/out" --progress never -q
: >"$D/err"
"$P" load "$D/out" --epoch 0 --rank 0 --backend cuda --verify-checksums; check "cuda load, good shard" ok $?
"$P" load "$D/out" --epoch 0 --rank 0 --backend cuda --register-mmap; check "cuda load --register-mmap, good shard" ok $?
truncate -s -4096 "$D/out/epoch-00000/rank-00001.shard"
"$P" load "$D/out" --epoch 0 --rank 1 --backend cuda 2>"$D/err"; rc=$?; check "cuda load, truncated shard refused" fail $rc; tail -c 300 "$D/err"
"$P" load "$D/out" --epoch 0 --rank 1 --backend cuda --register-mmap 2>"$D/err"; rc=$?; check "cuda load --register-mmap, truncated shard refused" fail $rc; tail -c 300 "$D/err"

# A big shard: 6,000 strings padded to KIB KiB each.
mkdir "$D/bigsrc"
cp testdata/cases/B10-delta-byte-array/strings_plain.parquet "$D/bigsrc/"
echo "tensors: [{name: s, column: s, dtype: U8, bytes: {mode: pad, max_len: $((KIB * 1024))}}]" >"$D/bigspec.yaml"
"$P" plan --source "$D/bigsrc" --global-batch 32 --shuffle none -o "$D/bigplan.json" -q >/dev/null
"$P" convert --plan "$D/bigplan.json" --spec "$D/bigspec.yaml" -o "$D/big" --progress never -q
ls -l "$D/big/epoch-00000/"
for flags in "" "--register-mmap" "--prefetch 1"; do
	: >"$D/err"
	peak "$P" load "$D/big" --epoch 0 --rank 0 --backend cuda $flags; rc=$?
	check "cuda load big shard $flags: peak RSS $(cat "$D/peak.mib") MiB" ok $rc
	grep -E "rate|GB" "$D/peak.out" | head -2
done
for flags in "" "--verify-checksums" "--register-mmap" "--register-mmap --verify-checksums"; do
	cp "$D/big/epoch-00000/rank-00000.shard" "$D/big.bak"
	"$P" load "$D/big" --epoch 0 --rank 0 --backend cuda $flags 2>"$D/err" &
	pid=$!
	sleep 0.5
	truncate -s 1M "$D/big/epoch-00000/rank-00000.shard"
	wait $pid; rc=$?
	check "cuda load $flags, shard truncated during the read: clean error or finished" any $rc
	grep -v "^time=" "$D/err" | head -5; grep "^time=" "$D/err" | tail -c 300; echo
	mv "$D/big.bak" "$D/big/epoch-00000/rank-00000.shard"
done
exit $fail
