#!/usr/bin/env python3
"""A counting Sentry endpoint for GPU hosts without Bugsink: accepts every envelope POST, keeps each
event's id, fingerprint, level, kind tag and title, and groups them into issues by fingerprint
(as Sentry does when an event carries one).

    counting-sentry.py serve PORT DIR   # answer 200 to every envelope, one JSON line per event in DIR/events.jsonl,
                                        # every envelope as received (un-gzipped) in DIR/envelopes/NNNNNN.envelope
    counting-sentry.py issues DIR       # one line per issue: its fingerprint and its events

The DSN to give a game: http://public@127.0.0.1:PORT/1
"""
import gzip
import http.server
import json
import os
import sys
import threading


def events_of(envelope: bytes):
    """The event payloads of a Sentry envelope (header line, then items: a header line and a payload
    of `length` bytes, or up to the next newline without one)."""
    pos = envelope.find(b"\n")
    if pos < 0:
        return
    pos += 1
    while pos < len(envelope):
        end = envelope.find(b"\n", pos)
        end = len(envelope) if end < 0 else end
        line = envelope[pos:end].strip()
        pos = end + 1
        if not line:
            continue
        item = json.loads(line)
        length = item.get("length")
        if length is None:
            end = envelope.find(b"\n", pos)
            end = len(envelope) if end < 0 else end
            payload, pos = envelope[pos:end], end + 1
        else:
            payload, pos = envelope[pos:pos + length], pos + length + 1
        if item.get("type") == "event":
            yield json.loads(payload)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        out = self.server.out
        with self.server.lock:
            self.server.received += 1
            name = os.path.join(out, "envelopes", f"{self.server.received:06}.envelope")
        # Written under a temp name, then renamed: a reader never sees half an envelope.
        with open(name + ".tmp", "wb") as f:
            f.write(body)
        os.rename(name + ".tmp", name)
        with open(os.path.join(out, "events.jsonl"), "a") as f:
            for event in events_of(body):
                tags = event.get("tags", {})
                f.write(json.dumps({
                    "event_id": event.get("event_id"),
                    "fingerprint": event.get("fingerprint"),
                    "level": event.get("level"),
                    "kind": tags.get("gpu.fault_kind"),
                    "verdict": tags.get("gpu.verdict"),
                    "title": (event.get("exception", {}).get("values") or [{}])[0].get("value"),
                }) + "\n")
        answer = b'{"id":"ok"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def main():
    if sys.argv[1] == "serve":
        server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler)
        server.out = sys.argv[3]
        server.lock = threading.Lock()
        server.received = 0
        os.makedirs(os.path.join(server.out, "envelopes"), exist_ok=True)
        server.serve_forever()
    elif sys.argv[1] == "issues":
        path = os.path.join(sys.argv[2], "events.jsonl")
        issues = {}
        if os.path.exists(path):
            for line in open(path):
                event = json.loads(line)
                issues.setdefault(json.dumps(event["fingerprint"]), []).append(event)
        print(f"{sum(len(v) for v in issues.values())} event(s) in {len(issues)} issue(s)")
        for fingerprint, events in issues.items():
            print(f"issue {fingerprint}")
            for e in events:
                print(f"  event {e['event_id']} kind={e['kind']} verdict={e['verdict']} title={e['title'][:160] if e['title'] else None}")


if __name__ == "__main__":
    main()
