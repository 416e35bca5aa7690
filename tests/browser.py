"""A headless Chromium for the page tests, driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: JSON messages ending in NUL on the browser's fds 3 and 4),
with the standard library alone.

``open_page`` loads a file, waits until the page says it is ready, and returns what the
page logged and requested, with a way to evaluate JavaScript and take screenshots. The
browser is Debian's ``chromium-headless-shell`` (or ``chromium``; ``CHROMIUM`` names
another); every host name resolves nowhere, so a page that reaches for the network fails
to, and the attempt is still seen.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

BROWSERS = ("chromium-headless-shell", "chromium", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost")


def find_browser() -> str | None:
    """The headless browser to use, None when none is installed."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


class Browser:
    """One browser process and its protocol pipe."""

    def __init__(self, binary: str, width: int, height: int):
        self.profile = tempfile.mkdtemp(prefix="dcpfast-browser-")
        to_browser, self._send = os.pipe()
        self._receive, from_browser = os.pipe()

        def fds() -> None:                    # in the child: the pipe on fds 3 and 4
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)
            os.setsid()                       # a group of its own: close ends them all

        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=fds)
        os.close(to_browser)
        os.close(from_browser)
        self.events: list[dict] = []
        self._replies: dict[int, dict] = {}
        self._next = 0
        self._ended = False
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self._receive, 1 << 16)
            except OSError:
                chunk = b""
            with self._changed:
                if not chunk:
                    self._ended = True
                    self._changed.notify_all()
                    return
                pending += chunk
                *messages, pending = pending.split(b"\0")
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                self._changed.notify_all()

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60) -> dict:
        with self._changed:
            self._next += 1
            number = self._next
        message = {"id": number, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        with self._changed:
            if not self._changed.wait_for(lambda: number in self._replies or self._ended,
                                          timeout):
                raise TimeoutError(f"{method}: no answer in {timeout} s")
            if number not in self._replies:
                raise RuntimeError(f"{method}: the browser ended")
            reply = self._replies.pop(number)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_for(self, method: str, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(
                lambda: any(e["method"] == method for e in self.events) or self._ended, timeout)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("Browser.close", timeout=10)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        # the browser's own processes too (a launcher script's child, renderers), which
        # outlive a browser that did not answer
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for fd in (self._send, self._receive):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """A page loaded in a browser: ``evaluate`` JavaScript, take a ``screenshot``, read
    its ``errors`` (console errors and uncaught exceptions) and ``requests`` (every URL
    it asked for)."""

    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def evaluate(self, expression: str, timeout: float = 60):
        found = self.browser.call("Runtime.evaluate", {
            "expression": expression, "awaitPromise": True, "returnByValue": True},
            self.session, timeout)
        if "exceptionDetails" in found:
            raise RuntimeError(found["exceptionDetails"].get("text", "exception"))
        return found["result"].get("value")

    def screenshot(self, path: Path, width: int) -> None:
        height = self.evaluate("document.documentElement.scrollHeight")
        shot = self.browser.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 16000), "scale": 1}},
            self.session)
        path.write_bytes(base64.b64decode(shot["data"]))

    @property
    def errors(self) -> list[str]:
        out = []
        for e in list(self.browser.events):
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description")))
                                    for a in p["args"]))
            elif e["method"] == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(d.get("exception", {}).get("description") or d.get("text", ""))
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(p["entry"]["text"])
        return out

    @property
    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in list(self.browser.events)
                if e["method"] == "Network.requestWillBeSent"]


@contextlib.contextmanager
def open_page(path: Path, *, ready: str = "window.__reportReady === true",
              scripts: bool = True, width: int = 1400, height: int = 900,
              timeout: float = 60):
    """``path`` loaded in a fresh headless browser, after ``ready`` holds (with
    ``scripts`` off: after the load event); yields its ``Page``."""
    binary = find_browser()
    if binary is None:
        raise FileNotFoundError("no headless Chromium: apt-get install chromium-headless-shell")
    browser = Browser(binary, width, height)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget",
                               {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session)
        if not scripts:
            browser.call("Emulation.setScriptExecutionDisabled", {"value": True}, session)
        browser.call("Page.navigate", {"url": path.resolve().as_uri()}, session)
        if not browser.wait_for("Page.loadEventFired", timeout):
            raise TimeoutError(f"{path} did not load in {timeout} s")
        page = Page(browser, session)
        if scripts:
            page.evaluate(_WAIT % {"ready": ready, "ms": int(timeout * 1000)}, timeout + 5)
        time.sleep(0.2)                     # the last events of the page arrive
        yield page
    finally:
        browser.close()


#: Resolves once ``ready`` holds and two frames have been painted (rejects on timeout).
_WAIT = """new Promise((resolve, reject) => {
    const began = performance.now();
    (function poll() {
        let ok = false;
        try { ok = !!(%(ready)s); } catch (e) {}
        if (ok) requestAnimationFrame(() => requestAnimationFrame(() => resolve(true)));
        else if (performance.now() - began > %(ms)d) reject(new Error("not ready"));
        else setTimeout(poll, 20);
    })();
})"""
