#!/usr/bin/env bash
# prep-nightly.sh: cron wrapper that keeps a sliding window of epochs
# materialized on this node's local disk.
#
# Each run:
#   1. reads the first epoch training still needs (written by the trainer to
#      $PREP_STATE, default 0 when missing),
#   2. converts epochs [FROM, FROM+WINDOW-1] for this node's ranks (complete,
#      verified shards are skipped; half-written ones are redone),
#   3. deletes shards of epochs before FROM with `prep gc`,
#   4. verifies the shard set.
# prep itself writes JSON log lines to stderr and Prometheus metrics to
# $PREP_METRICS (node_exporter textfile collector).
#
# Exit codes: 0 done (or another run still holds the output lock, which is
# logged and not an error for cron), otherwise prep's exit code:
# 1 failed, 2 usage error.
set -euo pipefail

: "${PREP_PLAN:?set PREP_PLAN to the plan.json}"
: "${PREP_SPEC:?set PREP_SPEC to the feature spec}"
: "${PREP_OUT:?set PREP_OUT to the node-local output directory}"
PREP_BIN=${PREP_BIN:-/usr/local/bin/prep}
PREP_WINDOW=${PREP_WINDOW:-2}
PREP_STATE=${PREP_STATE:-$PREP_OUT/../trainer-epoch}
PREP_METRICS=${PREP_METRICS:-/var/lib/node_exporter/textfile_collector/prep.prom}
# Ranks of this node: a fixed list ("0-7"), or "auto" when cron runs inside a
# launcher's environment. Cron has none, so the default is explicit.
PREP_RANKS=${PREP_RANKS:-0-7}

log() { # one JSON line, same field names as prep's own log lines
	printf '{"time":"%s","level":"%s","msg":"%s","output":"%s"}\n' \
		"$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$1" "$2" "$PREP_OUT"
}

from=0
if [[ -r $PREP_STATE ]]; then
	from=$(tr -dc '0-9' <"$PREP_STATE")
	from=${from:-0}
fi
to=$((from + PREP_WINDOW - 1))

# --json: summaries on stdout are JSON objects too, one per line, so the
# whole log is JSON lines.
common=(--log-format json --progress never --json)

run() {
	local rc=0 out
	# stdout is one JSON summary (verify's is indented): print it on one line.
	out=$("$PREP_BIN" "$@" "${common[@]}") || rc=$?
	if [[ -n $out ]]; then
		printf '%s\n' "${out//$'\n'/}"
	fi
	case $rc in
	0) return 0 ;;
	3)
		log WARN "another prep run holds the output lock; skipping this run"
		exit 0
		;;
	2)
		log ERROR "prep usage error (exit 2): fix the cron entry"
		exit 2
		;;
	*)
		log ERROR "prep $1 failed with exit $rc; the next run resumes"
		exit "$rc"
		;;
	esac
}

mkdir -p "$PREP_OUT"
log INFO "pre-staging epochs $from-$to"
run convert --plan "$PREP_PLAN" --spec "$PREP_SPEC" -o "$PREP_OUT" \
	--epochs "$from-$to" --ranks "$PREP_RANKS" --metrics-file "$PREP_METRICS"
if ((from > 0)); then
	run gc "$PREP_OUT" --keep-from-epoch "$from" --metrics-file "$PREP_METRICS"
fi
# --partial: this node holds only its ranks and a window of epochs.
run verify "$PREP_OUT" --plan "$PREP_PLAN" --partial
log INFO "epochs $from-$to ready"
