#!/usr/bin/env python3
"""Small helper for the bugsink-*.sh scripts (stdlib only, except `screenshot`, which needs websocket-client).

Subcommands (all print their result on stdout, errors on stderr with exit status 1):
  free-port START [COUNT]                   first port in START..START+COUNT-1 free on 127.0.0.1
  port-free PORT                            exit 0 if PORT is free on 127.0.0.1, 1 otherwise
  wait URL TIMEOUT_S [PID_FILE]             poll URL until it answers 200 (bounded; stops early if PID died)
  bootstrap URL TOKEN TEAM PROJECT          ensure team + project exist (REST API); print "ID DSN"
  check-token URL TOKEN                     exit 0 if TOKEN works against GET projects/
  event-url URL TOKEN PROJECT_ID EVENT_ID   print the UI details URL of an event (waits up to 10 s for it)
  resolve URL TOKEN PROJECT_ID WHAT        UI event details URL for WHAT: a URL, a /path, an event_id (hex or
                                            dashed), issue:<uuid>, event:<event_id>, an issue uuid, or "last"
  issue-url URL TOKEN PROJECT_ID            print the UI details URL of the newest event of the newest issue
  session URL USER PASSWORD                 Django form login; print the sessionid cookie value
  screenshot URL USER PASSWORD PAGE_URL OUT.png [WIDTH HEIGHT]
                                            log in, open PAGE_URL in headless Chromium (CDP), save a PNG

The REST API lives under /api/canonical/0/ and takes `Authorization: Bearer TOKEN`.
"""
import base64
import http.cookiejar
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

API = "/api/canonical/0/"


def die(msg):
    print(f"bugsink helper: {msg}", file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------- ports / waiting

def port_is_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # like gunicorn: SO_REUSEADDR, so that TIME_WAIT leftovers of a just-stopped server do not count as "in use"
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def cmd_free_port(start, count="100"):
    start, count = int(start), int(count)
    for p in range(start, start + count):
        if port_is_free(p):
            print(p)
            return
    die(f"no free port in 127.0.0.1:{start}..{start + count - 1}")


def cmd_port_free(port):
    sys.exit(0 if port_is_free(int(port)) else 1)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def cmd_wait(url, timeout_s, pid_file=None):
    """Poll URL until 200. With pid_file: give up early once the daemon is known to be dead."""
    start = time.monotonic()
    deadline = start + float(timeout_s)
    last = None
    while time.monotonic() < deadline:
        if pid_file:
            try:
                pid = int(open(pid_file).read().strip())
            except (OSError, ValueError):
                pid = None
            if pid is not None and not pid_alive(pid):
                die(f"the server process {pid} died while waiting for {url}")
            if pid is None and time.monotonic() - start > 10:
                die(f"no pid in {pid_file} 10 s after starting; the server did not come up")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
                last = f"HTTP {r.status}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}"
        except Exception as e:  # connection refused, timeout, ...
            last = repr(e)
        time.sleep(0.25)
    die(f"{url} did not answer 200 within {timeout_s} s (last: {last})")


# ---------------------------------------------------------------- REST API

def api(base, token, method, path, body=None, query=None):
    url = base.rstrip("/") + API + path
    if query:
        url += "?" + urllib.parse.urlencode(query)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except Exception:
            return e.code, raw.decode(errors="replace")[:500]


def list_all(base, token, path, query=None):
    """Follow DRF pagination ("next" links) and return all "results"."""
    q = dict(query or {})
    out = []
    st, page = api(base, token, "GET", path, query=q)
    while True:
        if st != 200:
            die(f"GET {path} -> {st}: {page}")
        out += page.get("results", [])
        nxt = page.get("next")
        if not nxt:
            return out
        req = urllib.request.Request(nxt, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=15) as r:
            st, page = r.status, json.loads(r.read())


def cmd_check_token(base, token):
    st, _ = api(base, token, "GET", "projects/")
    sys.exit(0 if st == 200 else 1)


def cmd_bootstrap(base, token, team_name, project_name):
    teams = [t for t in list_all(base, token, "teams/") if t["name"] == team_name]
    if teams:
        team_id = teams[0]["id"]
    else:
        st, t = api(base, token, "POST", "teams/", {"name": team_name})
        if st != 201:
            die(f"POST teams/ -> {st}: {t}")
        team_id = t["id"]
    projects = [p for p in list_all(base, token, "projects/") if p["name"] == project_name]
    if projects:
        proj = projects[0]
    else:
        st, proj = api(base, token, "POST", "projects/", {"team": team_id, "name": project_name})
        if st != 201:
            die(f"POST projects/ -> {st}: {proj}")
        # the create serializer does not include dsn; fetch the detail view
        st, proj = api(base, token, "GET", f"projects/{proj['id']}/")
        if st != 200:
            die(f"GET projects/ID/ -> {st}: {proj}")
    print(proj["id"], proj["dsn"])


def ui_event_url(base, issue_id, event_uuid):
    return f"{base.rstrip('/')}/issues/issue/{issue_id}/event/{event_uuid}/details/"


def cmd_event_url(base, token, project_id, event_id):
    event_id = event_id.replace("-", "").lower()
    deadline = time.monotonic() + 10
    while True:
        st, ev = api(base, token, "GET", "events/lookup/", query={"project": project_id, "event_id": event_id})
        if st == 200:
            print(ui_event_url(base, ev["issue"], ev["id"]))
            return
        if time.monotonic() > deadline:
            die(f"GET events/lookup/?project={project_id}&event_id={event_id} -> {st}: {ev}")
        time.sleep(0.5)


def cmd_resolve(base, token, project_id, what):
    """Turn a UI URL / path / event id / issue id / "last" into the UI URL of an event details page."""
    w = what.strip()
    if w.startswith(("http://", "https://")):
        print(w)
    elif w.startswith("/"):
        print(base.rstrip("/") + w)
    elif w in ("last", "latest", ""):
        cmd_issue_url(base, token, project_id)
    elif w.startswith("issue:"):
        print(f"{base.rstrip('/')}/issues/issue/{w[6:]}/event/last/details/")
    else:
        hexid = w[6:] if w.startswith("event:") else w
        hexid = hexid.replace("-", "").lower()
        if not re.fullmatch(r"[0-9a-f]{32}", hexid):
            die(f"not a URL, path, event id, issue:<uuid> or 'last': {what!r}")
        st, ev = api(base, token, "GET", "events/lookup/", query={"project": project_id, "event_id": hexid})
        if st == 200:
            print(ui_event_url(base, ev["issue"], ev["id"]))
            return
        if w.startswith("event:"):
            cmd_event_url(base, token, project_id, hexid)  # waits a bit, then fails clearly
            return
        st, issue = api(base, token, "GET", f"issues/{w}/")
        if st == 200:
            print(f"{base.rstrip('/')}/issues/issue/{issue['id']}/event/last/details/")
            return
        die(f"{what!r} is neither an event_id of project {project_id} nor an issue id")


def cmd_issue_url(base, token, project_id):
    # newest issue (ordering by last_seen descending), then its newest event
    st, page = api(base, token, "GET", "issues/", query={"project": project_id, "order": "desc", "sort": "last_seen"})
    if st != 200 or not page.get("results"):
        die(f"GET issues/?project={project_id} -> {st}: {page}")
    issue = page["results"][0]
    st, page = api(base, token, "GET", "events/", query={"issue": issue["id"], "order": "desc"})
    if st != 200 or not page.get("results"):
        die(f"GET events/?issue={issue['id']} -> {st}: {page}")
    print(ui_event_url(base, issue["id"], page["results"][0]["id"]))


# ---------------------------------------------------------------- login + screenshot

def django_login(base, user, password):
    """GET the login page (csrftoken cookie + form token), POST the credentials; return the cookie jar."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    login_url = base.rstrip("/") + "/accounts/login/"
    with opener.open(login_url, timeout=15) as r:
        html = r.read().decode()
    m = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    if not m:
        die("no csrfmiddlewaretoken on the login page")
    form = urllib.parse.urlencode({"csrfmiddlewaretoken": m.group(1), "username": user, "password": password}).encode()
    req = urllib.request.Request(login_url, data=form, method="POST")
    req.add_header("Referer", login_url)
    with opener.open(req, timeout=15) as r:
        r.read()
    if not any(c.name == "sessionid" for c in jar):
        die("login failed (no sessionid cookie; wrong password?)")
    return jar


def cmd_session(base, user, password):
    jar = django_login(base, user, password)
    print(next(c.value for c in jar if c.name == "sessionid"))


class CDP:
    def __init__(self, ws_url):
        import websocket  # websocket-client
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    die(f"CDP {method}: {msg['error']}")
                return msg.get("result", {})

    def wait_event(self, name, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                msg = json.loads(self.ws.recv())
            except Exception:
                break
            if msg.get("method") == name:
                return msg
        return None


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    die("chromium not found (apt-get install -y chromium)")


def cmd_screenshot(base, user, password, page_url, out, width="1400", height="1800"):
    jar = django_login(base, user, password)
    host = urllib.parse.urlparse(base).hostname
    profile = tempfile.mkdtemp(prefix="bugsink-chromium-")
    port_file = os.path.join(profile, "DevToolsActivePort")
    args = [
        find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
        f"--user-data-dir={profile}", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
        f"--window-size={width},{height}", "about:blank",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(profile, "chromium.log"), "w"))
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file) or len(open(port_file).read().split("\n")) < 2:
            if proc.poll() is not None or time.monotonic() > deadline:
                die("chromium did not start: " + open(os.path.join(profile, "chromium.log")).read()[-2000:])
            time.sleep(0.1)
        devtools_port = int(open(port_file).read().split("\n")[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{devtools_port}/json/list", timeout=10) as r:
            targets = [t for t in json.loads(r.read()) if t.get("type") == "page"]
        cdp = CDP(targets[0]["webSocketDebuggerUrl"])
        cdp.call("Network.enable")
        cdp.call("Page.enable")
        for c in jar:
            cdp.call("Network.setCookie", name=c.name, value=c.value, domain=host, path=c.path or "/",
                     httpOnly=c.name == "sessionid")
        cdp.call("Emulation.setDeviceMetricsOverride", width=int(width), height=int(height),
                 deviceScaleFactor=1, mobile=False)
        nav = cdp.call("Page.navigate", url=page_url)
        if nav.get("errorText"):
            die(f"navigation failed: {nav['errorText']}")
        if not cdp.wait_event("Page.loadEventFired", 30):
            die("page did not finish loading within 30 s")
        time.sleep(0.5)  # let fonts/layout settle
        final = cdp.call("Runtime.evaluate", expression="location.href", returnByValue=True)["result"]["value"]
        if "/accounts/login/" in final:
            die(f"ended on the login page ({final}); the session cookie was not accepted")
        # capture the full page height (capped) rather than only the viewport
        h = cdp.call("Runtime.evaluate", expression="document.documentElement.scrollHeight",
                     returnByValue=True)["result"]["value"]
        h = max(int(height), min(int(h), 8000))
        shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": int(width), "height": h, "scale": 1})
        with open(out, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(out)
        try:
            cdp.call("Browser.close")
        except Exception:
            pass
    finally:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


COMMANDS = {
    "free-port": cmd_free_port, "port-free": cmd_port_free, "wait": cmd_wait, "bootstrap": cmd_bootstrap,
    "check-token": cmd_check_token, "resolve": cmd_resolve, "event-url": cmd_event_url, "issue-url": cmd_issue_url,
    "session": cmd_session, "screenshot": cmd_screenshot,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        COMMANDS[sys.argv[1]](*sys.argv[2:])
    except TypeError as e:
        die(f"{sys.argv[1]}: bad arguments ({e})")
