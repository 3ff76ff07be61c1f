#!/usr/bin/env bash
# make test-s3: the object-store tests against a real S3 server, SeaweedFS,
# on 127.0.0.1 only (opt-in; `make test` uses an in-process server instead).
#
# SeaweedFS (Apache-2.0) is a Go module whose replace directives make
# `go install` refuse it, so the module is downloaded and `weed` is built
# inside its module directory, once, into .cache/weed (many minutes on 2
# cores; reused afterwards). `weed mini` then runs master, volume, filer and
# S3 gateway in one process with every port bound to 127.0.0.1, and creates
# the credentials and bucket given by AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY and S3_BUCKET. Telemetry is off.
#
# Environment: GO (default go), WEED (a weed binary to use instead),
# S3_TEST_PKGS (default: the source package and the end-to-end suite).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6
WEED=${WEED:-.cache/weed}
mkdir -p .cache

if [ ! -x "$WEED" ]; then
	echo "test-s3: building SeaweedFS $SEAWEEDFS_VERSION into $WEED (once; many minutes)" >&2
	dir=$(cd /tmp && GOFLAGS=-mod=mod $GO mod download -json "github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$dir" ] || { echo "test-s3: could not download github.com/seaweedfs/seaweedfs" >&2; exit 1; }
	(cd "$dir" && nice -n 19 $GO build -o "$OLDPWD/$WEED" ./weed)
fi

work=$(mktemp -d)
weed_pid=
cleanup() {
	if [ -n "$weed_pid" ]; then kill "$weed_pid" 2>/dev/null || true; wait "$weed_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

# A free block of ports on loopback (the gRPC ports are these + 10000).
base=$(( 20000 + (RANDOM % 200) * 20 ))
export AWS_ACCESS_KEY_ID=AKIAPREPSEAWEED00000
export AWS_SECRET_ACCESS_KEY=prep-seaweed-secret-0123456789abcdefghij
export AWS_REGION=us-east-1
export S3_BUCKET=prep-real
mkdir -p "$work/data"
"$WEED" mini -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$work/data" \
	-master.port=$base -volume.port=$((base + 1)) -filer.port=$((base + 2)) -s3.port=$((base + 3)) \
	-admin.port=$((base + 4)) -admin.port.legacy=0 -s3.port.iceberg=0 -s3.port.lance=0 -webdav=false \
	-master.telemetry=false >"$work/weed.log" 2>&1 &
weed_pid=$!
endpoint=http://127.0.0.1:$((base + 3))
for i in $(seq 1 120); do
	if curl -s -o /dev/null "$endpoint" 2>/dev/null; then break; fi
	if ! kill -0 "$weed_pid" 2>/dev/null; then
		echo "test-s3: weed mini exited:" >&2; tail -30 "$work/weed.log" >&2; exit 1
	fi
	sleep 0.5
done
echo "test-s3: SeaweedFS S3 gateway at $endpoint" >&2
export PREP_S3_TEST_ENDPOINT=$endpoint
$GO test -count=1 ${S3_TEST_PKGS:-./source/ ./test/s3/} -run 'RealServer|Seaweed|S3' -v 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|\s+\S+_test.go)' 
