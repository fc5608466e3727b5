#!/usr/bin/env bash
# The README's demo: a GPU crash drill end to end into a local Bugsink, printing the event's URL.
#   scripts/demo.sh [scenario]      (default: use-after-free; any GPU_CRASH_DRILL value works)
# Starts (or reuses) a throw-away Bugsink on 127.0.0.1, runs `cargo xtask drill` with its DSN, then
# looks the event up over Bugsink's REST API. The report JSON stays in target/demo/reports.
set -euo pipefail
cd "$(dirname "$0")/.."

scenario="${1:-${GPU_CRASH_DRILL:-use-after-free}}"
state=target/bugsink-demo
reports=target/demo/reports

scripts/bugsink-up.sh "$state" >/dev/null
# shellcheck disable=SC1091
source "$state/env"

rm -rf "$reports"
set +e
SENTRY_DSN="$SENTRY_DSN" GPU_CRASH_REPORT_DIR="$reports" GPU_CRASH_DRILL="$scenario" \
  CRASH_DRILL_HANG_TIMEOUT_MS="${CRASH_DRILL_HANG_TIMEOUT_MS:-3000}" \
  cargo xtask drill 2> >(grep -E '^(GPU |\[gpu_crash_drill\])' >&2)
code=$?
set -e
echo "demo: the drill exited with code $code (non-zero is the crash it was asked for)"

report=$(ls -t "$reports"/*.json 2>/dev/null | head -n 1 || true)
if [ -z "$report" ]; then
  echo "demo: no report was written (did the drill fire?)" >&2
  exit 1
fi
event_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$report")
echo "demo: report $report (event $event_id)"

lookup=$(curl -fsS -H "Authorization: Bearer $BUGSINK_TOKEN" \
  "$BUGSINK_URL/api/canonical/0/events/lookup/?project=$BUGSINK_PROJECT_ID&event_id=$event_id") || {
  echo "demo: the event is not in Bugsink (yet); it waits in $reports/outbox for the next launch" >&2
  exit 1
}
url=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(sys.argv[2] + "/issues/issue/" + d["issue"] + "/event/" + d["id"] + "/details/")' "$lookup" "$BUGSINK_URL")
echo "demo: event on the dashboard: $url"
echo "demo: log in as $BUGSINK_ADMIN_USER / $BUGSINK_ADMIN_PASSWORD"
