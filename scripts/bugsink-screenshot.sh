#!/usr/bin/env bash
# Screenshot a Bugsink event details page with headless Chromium, logged in as the admin of bugsink-up.sh.
#
#   scripts/bugsink-screenshot.sh STATE_DIR EVENT_URL_OR_ISSUE OUT.png [WIDTH [HEIGHT]]
#
# EVENT_URL_OR_ISSUE is one of:
#   http://127.0.0.1:PORT/issues/issue/<issue uuid>/event/<event uuid>/details/   (any UI URL, used as is)
#   /issues/issue/...                        a UI path
#   <event_id>                               the Sentry event_id (32 hex or dashed), looked up in the project;
#                                            if that fails, it is tried as an issue uuid
#   event:<event_id> | issue:<issue uuid>    explicit
#   last                                     the newest event of the most recently seen issue
# The page is captured full-height (capped at 8000 px), default width 1400. Prints the page URL and OUT.png.
#
# How: scripts/bugsink/helper.py does the Django form login with urllib (GET /accounts/login/ for the csrftoken,
# POST username/password) and hands the sessionid cookie to a fresh headless Chromium through the DevTools protocol
# (--remote-debugging-port, python websocket-client), then Page.captureScreenshot.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HELPER="$SCRIPT_DIR/bugsink/helper.py"
VENV="${BUGSINK_VENV:-$HOME/.cache/bevy_gpu_crash_reporter/bugsink-venv}"

die() { echo "bugsink-screenshot: error: $*" >&2; exit 1; }

[[ $# -ge 3 ]] || { sed -n '2,14p' "$0" >&2; exit 2; }
STATE_DIR="$1"; WHAT="$2"; OUT="$3"; WIDTH="${4:-1400}"; HEIGHT="${5:-1000}"
ENV_FILE="$STATE_DIR/env"
[[ -f "$ENV_FILE" ]] || die "$ENV_FILE not found; run scripts/bugsink-up.sh $STATE_DIR first"
# shellcheck disable=SC1090
source "$ENV_FILE"
[[ -x "$VENV/bin/python" ]] || die "no venv at $VENV; run scripts/bugsink-up.sh first"
PY="$VENV/bin/python"

"$PY" "$HELPER" wait "$BUGSINK_URL/health/ready" 5 || die "Bugsink at $BUGSINK_URL is not answering"

if ! command -v chromium >/dev/null 2>&1; then
    echo "bugsink-screenshot: installing Debian chromium (apt-get install -y chromium)" >&2
    if [[ $(id -u) -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get install -y chromium >/dev/null || { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y chromium >/dev/null; } \
        || die "could not install chromium"
fi
"$PY" -c 'import websocket' 2>/dev/null || "$VENV/bin/pip" install --disable-pip-version-check -q websocket-client \
    || die "could not pip install websocket-client into $VENV"

PAGE_URL="$("$PY" "$HELPER" resolve "$BUGSINK_URL" "$BUGSINK_TOKEN" "$BUGSINK_PROJECT_ID" "$WHAT")" \
    || die "could not find a page for '$WHAT'"
mkdir -p "$(dirname "$OUT")"
echo "$PAGE_URL"
"$PY" "$HELPER" screenshot "$BUGSINK_URL" "$BUGSINK_ADMIN_USER" "$BUGSINK_ADMIN_PASSWORD" "$PAGE_URL" "$OUT" "$WIDTH" "$HEIGHT"
