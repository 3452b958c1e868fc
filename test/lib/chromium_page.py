#!/usr/bin/env python3
# chromium_page.py URL SECONDS DOM_FILE [PNG_FILE] [--eval JS]: load URL in headless
# Chromium (a window of 1280x1400, a profile of its own removed afterwards), let the page
# run SECONDS of real time, then write its DOM (document.documentElement.outerHTML, after
# its scripts ran) to DOM_FILE and, if given, a screenshot of the whole page to PNG_FILE;
# with --eval, print the value of JS evaluated in the page last, as JSON.
# chromium_page.py --serve: start Chromium once, then load pages as stdin asks, one JSON
# request a line (serve() below): a suite that starts the browser early keeps its start,
# which takes a small machine's CPUs for a moment, away from what it measures later.
# Used by test/integration/status_page.sh and status_page_rack.sh.
#
# Why not `chromium --dump-dom`: that runs the page in virtual time, where the status
# page's 2 s timers fire at once and its polls come milliseconds apart, so the rates it
# computes from two polls say nothing. Here the page runs on the wall clock, as in a
# person's browser. Chromium is driven over its DevTools pipe (--remote-debugging-pipe:
# JSON commands on fd 3, answers and events on fd 4, each ended by a NUL), which needs
# no library and no TCP port.
import argparse
import base64
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

WIDTH, HEIGHT = 1280, 1400


class Browser:
    def __init__(self):
        self.profile = tempfile.TemporaryDirectory(prefix="chromium-page.")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # Chromium reads fd 3 and writes fd 4: put the pipe ends there in the child
        # (through fds above 10, so that neither end is overwritten by the other's dup2);
        # pass_fds keeps 3 and 4 open past the exec (both exist here: os.pipe takes the
        # lowest free numbers).
        def fds():
            r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--remote-debugging-pipe", "--window-size=%d,%d" % (WIDTH, HEIGHT),
             "--user-data-dir=" + self.profile.name,
             "--no-first-run", "--no-default-browser-check", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.environ.get("CHROMIUM_LOG", os.devnull), "ab"))
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0

    def call(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its DevTools pipe")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") != self.next_id:
                continue  # an event, or nothing we wait for
            if "error" in answer:
                raise RuntimeError(method + ": " + json.dumps(answer["error"]))
            return answer["result"]

    def close(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.profile.cleanup()


def load(b, url, seconds, dom_file, png_file=None, js=None):
    """Load url in a new tab of b for seconds, write its DOM (and screenshot), close the
    tab; the value of js evaluated last (None without js)."""
    target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    try:
        s = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, s)
        nav = b.call("Page.navigate", {"url": url}, s)
        if nav.get("errorText"):
            raise RuntimeError("cannot load " + url + ": " + nav["errorText"])
        time.sleep(seconds)
        dom = b.call("Runtime.evaluate", {"expression": "document.documentElement.outerHTML",
                                          "returnByValue": True}, s)["result"]["value"]
        with open(dom_file, "w") as f:
            f.write(dom + "\n")
        if png_file:
            # The whole page, not only the window: its height is the content's.
            size = b.call("Page.getLayoutMetrics", {}, s)["cssContentSize"]
            shot = b.call("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": WIDTH,
                         "height": max(HEIGHT, int(size["height"])), "scale": 1}}, s)
            with open(png_file, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        if not js:
            return None
        r = b.call("Runtime.evaluate", {"expression": js, "returnByValue": True}, s)
        if "exceptionDetails" in r:
            raise RuntimeError("eval: " + json.dumps(r["exceptionDetails"]))
        return r["result"].get("value")
    finally:
        b.call("Target.closeTarget", {"targetId": target})


def serve(b):
    """One JSON request a line on stdin ({"url", "seconds", "dom", "png", "eval"}), one
    JSON answer a line on stdout ({"eval": VALUE} or {"error": WHY}); "ready" first."""
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            q = json.loads(line)
            v = load(b, q["url"], float(q["seconds"]), q["dom"], q.get("png"), q.get("eval"))
            print(json.dumps({"eval": v}), flush=True)
        except (RuntimeError, OSError, KeyError, ValueError) as e:
            print(json.dumps({"error": str(e)}), flush=True)


def main():
    ap = argparse.ArgumentParser(description="load a page in headless Chromium, on the wall clock")
    ap.add_argument("url", nargs="?")
    ap.add_argument("seconds", nargs="?", type=float,
                    help="how long the page runs before it is read")
    ap.add_argument("dom_file", nargs="?", help="where its DOM goes")
    ap.add_argument("png_file", nargs="?", help="where a screenshot of the whole page goes")
    ap.add_argument("--eval", dest="js", help="an expression evaluated in the page last; "
                    "its value printed as JSON")
    ap.add_argument("--serve", action="store_true",
                    help="start Chromium, then load pages as stdin asks (see serve())")
    a = ap.parse_args()
    # SIGTERM (a suite's cleanup) closes the browser too, through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if not a.serve and (a.url is None or a.seconds is None or a.dom_file is None):
        ap.error("URL SECONDS DOM_FILE, or --serve")
    b = Browser()
    try:
        if a.serve:
            serve(b)
        else:
            v = load(b, a.url, a.seconds, a.dom_file, a.png_file, a.js)
            if a.js:
                print(json.dumps(v))
    finally:
        b.close()


if __name__ == "__main__":
    main()
