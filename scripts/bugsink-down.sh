#!/usr/bin/env bash
# Stop the throw-away Bugsink started by bugsink-up.sh.
#
#   scripts/bugsink-down.sh [--wipe] [STATE_DIR]
#
# Kills the gunicorn master whose pid is in STATE_DIR/gunicorn.pid (default STATE_DIR: target/bugsink) and waits for
# it to exit. The data (SQLite DBs, token, password, env) stays unless --wipe is given, in which case STATE_DIR is
# removed.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"

WIPE=0
STATE_DIR=""
for arg in "$@"; do
    case "$arg" in
        --wipe) WIPE=1 ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) [[ -z "$STATE_DIR" ]] || { echo "bugsink-down: too many arguments" >&2; exit 2; }; STATE_DIR="$arg" ;;
    esac
done
STATE_DIR="${STATE_DIR:-$REPO_ROOT/target/bugsink}"
PID_FILE="$STATE_DIR/gunicorn.pid"

log() { echo "bugsink-down: $*" >&2; }

if [[ -s "$PID_FILE" ]]; then
    PID="$(cat "$PID_FILE")"
    if kill -0 "$PID" 2>/dev/null && [[ -r "/proc/$PID/cmdline" ]] \
        && ! tr '\0' ' ' < "/proc/$PID/cmdline" | grep -q gunicorn; then
        log "pid $PID is not a gunicorn process (stale pid file); not killing it"
    elif kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID"
        for _ in $(seq 1 100); do  # up to 10 s for a graceful stop
            kill -0 "$PID" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$PID" 2>/dev/null; then
            log "pid $PID still alive after 10 s; sending KILL"
            kill -KILL "$PID" 2>/dev/null || true
            sleep 0.5
        fi
        log "stopped (pid $PID)"
    else
        log "not running (stale pid file, pid $PID)"
    fi
    rm -f "$PID_FILE"
else
    log "not running (no $PID_FILE)"
fi

if [[ "$WIPE" == 1 && -d "$STATE_DIR" ]]; then
    # only remove something that looks like a bugsink-up.sh state dir
    if [[ -f "$STATE_DIR/bugsink_conf.py" || -f "$STATE_DIR/db.sqlite3" ]]; then
        rm -rf "$STATE_DIR"
        log "wiped $STATE_DIR"
    else
        log "refusing to wipe $STATE_DIR: it does not look like a bugsink-up.sh state dir"
        exit 1
    fi
fi
