#!/usr/bin/env bash
# Send one hand-made GPU-crash event to the Bugsink of STATE_DIR with curl (no Rust involved) and print its UI URL.
#
#   scripts/bugsink-send-test-event.sh [STATE_DIR]
#
# Prints three lines: the event_id (32 hex), the HTTP status of the envelope POST, and the UI details URL.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
STATE_DIR="${1:-$REPO_ROOT/target/bugsink}"
[[ -f "$STATE_DIR/env" ]] || { echo "bugsink-send-test-event: no $STATE_DIR/env; run bugsink-up.sh" >&2; exit 1; }
# shellcheck disable=SC1090
source "$STATE_DIR/env"

KEY="$(sed -E 's#^https?://([^@:]+)(:[^@]*)?@.*#\1#' <<<"$SENTRY_DSN")"
EID="$(python3 -c 'import uuid; print(uuid.uuid4().hex)')"
TS="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

ENVELOPE="$(EID="$EID" TS="$TS" DSN="$SENTRY_DSN" python3 -c '
import json, os
eid, ts = os.environ["EID"], os.environ["TS"]
event = {
    "event_id": eid, "timestamp": ts, "platform": "native", "level": "fatal",
    "release": "bevy_gpu_crash_reporter@0.0.0-test", "environment": "test",
    "exception": {"values": [{"type": "DeviceLost", "value": "wgpu device lost: GPU hang (timeout)",
                              "mechanism": {"type": "wgpu", "handled": False}}]},
    "contexts": {"gpu": {"name": "NVIDIA GeForce RTX 3070", "vendor_id": "0x10de", "device_id": "0x2484",
                         "api_type": "Vulkan", "driver_version": "550.54.14"},
                 "os": {"name": "Linux"}},
    "tags": {"gpu.backend": "vulkan", "crash.kind": "device_lost"},
    "extra": {"frame": 1234},
}
print(json.dumps({"event_id": eid, "dsn": os.environ["DSN"], "sent_at": ts}))
print(json.dumps({"type": "event"}))
print(json.dumps(event))
')"

echo "$EID"
curl -sS -o /dev/null -w '%{http_code}\n' -X POST "$BUGSINK_URL/api/$BUGSINK_PROJECT_ID/envelope/" \
    -H "X-Sentry-Auth: Sentry sentry_version=7, sentry_key=$KEY, sentry_client=bugsink-send-test-event/1" \
    -H 'Content-Type: application/x-sentry-envelope' \
    --data-binary "$ENVELOPE"
python3 "$SCRIPT_DIR/bugsink/helper.py" event-url "$BUGSINK_URL" "$BUGSINK_TOKEN" "$BUGSINK_PROJECT_ID" "$EID"
