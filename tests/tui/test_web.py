"""The TUI in a browser (``--web``): textual-serve, a TUI subprocess per tab, real servers.

``nsqbox tui --web`` is checked over its own websocket protocol (no browser needed): the page
is served, and a session runs ``nsqbox tui`` with the flags given (``--read-only`` shows in
its status line). ``nsqbox up --web`` is checked in a real browser: Debian's headless
Chromium driven by selenium through the system chromedriver (no driver download), skipped when
they are absent. The terminal in the page is drawn on a canvas by xterm.js, so the test reads
its text from xterm's buffer: a script added before the page's own captures the xterm
``Terminal`` the page creates (test code only; nsqbox serves no JavaScript of its own).

Set ``NSQBOX_WEB_SCREENSHOT=path.png`` to keep a screenshot of the browser at the Messages view
(``screenshots/web.png`` is made so).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from tests.reliability.blocking import wait_for

from .conftest import TIMEOUT

CHROMIUM = Path(os.environ.get("NSQBOX_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("NSQBOX_CHROMEDRIVER", "/usr/bin/chromedriver"))
#: The bound on every wait in a browser (page load, a TUI process starting, a view drawn).
BROWSER_TIMEOUT = 90.0
#: Strips terminal escape sequences from what a session sends.
ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>78]")


def read_line(stream: IO[str], process: subprocess.Popen[str], what: str) -> str:
    """The next line ``process`` writes to ``stream``, within BROWSER_TIMEOUT."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(BROWSER_TIMEOUT):
            raise AssertionError(f"no {what} within {BROWSER_TIMEOUT}s")
    line = stream.readline()
    if not line:
        raise AssertionError(f"the process exited ({process.wait()}) before its {what}")
    return line


def stop(process: subprocess.Popen[Any]) -> None:
    """SIGINT, as Ctrl-C; kill if it is not gone within TIMEOUT."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(TIMEOUT * 3)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running(argv: list[str], log: Path, *, read: str) -> Iterator[subprocess.Popen[str]]:
    """``python -m nsqbox ARGV`` until the block ends (then stopped as by Ctrl-C).

    ``read`` (``stdout`` or ``stderr``) is piped to the test, the other goes to ``log``.
    """
    with log.open("w") as other:
        process = subprocess.Popen(
            [sys.executable, "-m", "nsqbox", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if read == "stdout" else other,
            stderr=subprocess.PIPE if read == "stderr" else other,
            text=True,
        )
    try:
        yield process
    finally:
        stop(process)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def tab_argvs(lookupd: str) -> dict[int, list[str]]:
    """The ``nsqbox tui`` processes still running for ``lookupd`` (Linux's /proc; else none),
    each with its command line."""
    flag = f"--lookupd-http-address={lookupd}"
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:  # gone meanwhile
            continue
        if "tui" in argv and flag in argv:
            found[int(cmdline.parent.name)] = argv
    return found


def tab_processes(lookupd: str) -> list[int]:
    """The ``nsqbox tui`` processes still running for ``lookupd``."""
    return list(tab_argvs(lookupd))


# -- nsqbox tui --web, over textual-serve's websocket ------------------------------------------


def split_url(url: str) -> tuple[str, str]:
    """The printed URL (``http://host:port/?token=T``) as the page's base URL and the token."""
    found = re.fullmatch(r"(http://[^/]+)/\?token=([A-Za-z0-9_-]{40,})", url)
    assert found, url
    return found.group(1), found.group(2)


async def session_text(url: str, *wanted: str, then: Callable[[], object] = lambda: None) -> str:
    """Open a session (a TUI process) at the printed ``url`` (its token too); what it drew
    once that shows all ``wanted`` (``then`` is called at that point, the session still
    open)."""
    import aiohttp  # textual-serve's own dependency

    seen = b""
    base, token = split_url(url)
    async with asyncio.timeout(BROWSER_TIMEOUT), aiohttp.ClientSession() as client:
        ws_url = base.replace("http://", "ws://") + f"/ws?token={token}&width=140&height=40"
        async with client.ws_connect(ws_url) as ws:
            async for message in ws:
                if message.type is aiohttp.WSMsgType.BINARY:
                    seen += message.data
                    text = ESCAPES.sub(b"", seen).decode("utf-8", "replace")
                    if all(w in text for w in wanted):
                        then()
                        return text
    raise AssertionError(f"the session ended without showing {wanted!r}")


def test_tui_web_serves_the_tui_with_its_flags(nsq: Any, tmp_path: Path) -> None:
    nsq.publish("webbed", b"x")
    lookupd = str(nsq.lookupd_http_address)
    argv = ["tui", "--web", "--web-port=0", "--read-only", f"--lookupd-http-address={lookupd}"]
    with running(argv, tmp_path / "stdout.log", read="stderr") as process:
        assert process.stderr is not None
        line = read_line(process.stderr, process, "serving line")
        found = re.search(r"serving the TUI at (http://127\.0\.0\.1:\d+/\?token=\S+)", line)
        assert found, line
        url = found.group(1)
        base, _ = split_url(url)
        assert httpx.get(base, timeout=TIMEOUT, trust_env=False).status_code == 403
        with httpx.Client(timeout=TIMEOUT, trust_env=False, follow_redirects=True) as browser:
            page = browser.get(url)  # sets the cookie, then the page without the token
        assert page.status_code == 200
        assert str(page.url) == f"{base}/"
        assert f'data-session-websocket-url="{base.replace("http", "ws")}/ws"' in page.text
        assert "<script" in page.text  # textual-serve's, from its static files
        # the tab's TUI got the flags: it reads that lookupd, it is read-only
        text = asyncio.run(session_text(url, f"lookupd {lookupd}", "READ-ONLY", "webbed"))
        assert "Delete" not in text
    wait_for(lambda: tab_processes(lookupd) == [], timeout=TIMEOUT)  # it ended with its tab


def test_up_web_tabs_get_the_boxs_admin_service(tmp_path: Path) -> None:
    # --ephemeral-ports puts the web page on a free port too
    argv = ["up", "--web", "--ephemeral-ports", "--ready-json"]
    argv.append(f"--data-path={tmp_path / 'data'}")
    with running(argv, tmp_path / "stderr.log", read="stdout") as box:
        assert box.stdout is not None
        ready = json.loads(read_line(box.stdout, box, "ready line"))
        base, _ = split_url(ready["tui_web_url"])
        assert not base.endswith(":4172")
        lookupd = ready["lookupd_http_address"]
        tabs: list[list[str]] = []
        asyncio.run(
            session_text(
                ready["tui_web_url"],
                f"lookupd {lookupd}",
                then=lambda: tabs.extend(tab_argvs(lookupd).values()),
            )
        )
        [tab] = tabs
        assert f"--admin-http-address={ready['admin_http_address']}" in tab
        assert "--read-only" not in tab
        # a browser tab's TUI: it saves only under the box's data directory
        assert "--web-session" in tab
        assert f"--web-save-dir={ready['data_path']}" in tab
    wait_for(lambda: tab_processes(lookupd) == [], timeout=TIMEOUT)


def test_up_web_on_a_busy_port_says_so(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                *(sys.executable, "-m", "nsqbox", "up", "--web", "--ephemeral-ports"),
                f"--web-port={port}",
                f"--data-path={tmp_path / 'data'}",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT * 3,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 1
    assert f"the web TUI (--web) cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "--web-port 0 picks a free port" in result.stderr


def test_up_web_refuses_web_with_tui() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nsqbox", "up", "--web", "--tui", "--ephemeral-ports"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1
    assert "use --tui or --web, not both" in result.stderr


# -- nsqbox up --web, in a browser ---------------------------------------------------------------

#: Added before the page's scripts: keeps every object the page assigns to a ``terminal``
#: property (textual-serve's page holds its xterm.js Terminal so).
CAPTURE = """
(() => {
  const terminals = [];
  window.__nsqboxTerminals = terminals;
  Object.defineProperty(Object.prototype, "terminal", {
    configurable: true,
    set(value) {
      Object.defineProperty(this, "terminal", {
        value, writable: true, configurable: true, enumerable: true,
      });
      terminals.push(value);
    },
  });
})();
"""
#: The terminal's visible text, one line per row (null before the page made its terminal).
SCREEN = """
const terminal = (window.__nsqboxTerminals || []).find((t) => t && t.buffer);
if (!terminal) { return null; }
const buffer = terminal.buffer.active;
const rows = [];
for (let y = 0; y < terminal.rows; y++) {
  const line = buffer.getLine(buffer.viewportY + y);
  rows.push(line ? line.translateToString(true) : "");
}
return rows.join("\\n");
"""


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Headless Chromium through the system chromedriver; skips when either is missing."""
    for program in (CHROMIUM, CHROMEDRIVER):
        if not os.access(program, os.X_OK):
            pytest.skip(f"no {program} (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    # selenium-manager must not look for (or download) a driver: the system one is given
    monkeypatch.setenv("SE_OFFLINE", "true")
    monkeypatch.setenv("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.set_page_load_timeout(BROWSER_TIMEOUT)
        yield driver
    finally:
        driver.quit()


def screen_text(driver: Any) -> str:
    text = driver.execute_script(SCREEN)
    return text if isinstance(text, str) else ""


def wait_for_text(driver: Any, *wanted: str) -> str:
    """The screen's text once it shows every one of ``wanted``; AssertionError after a while."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.wait import WebDriverWait

    shown = [""]

    def showing(driver: Any) -> bool:
        shown[0] = screen_text(driver)
        return all(w in shown[0] for w in wanted)

    try:
        WebDriverWait(driver, BROWSER_TIMEOUT, poll_frequency=0.1).until(showing)
    except TimeoutException:
        raise AssertionError(f"the page never showed {wanted!r}; it shows:\n{shown[0]}") from None
    return shown[0]


def test_up_web_in_a_browser(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    argv = ["up", "--web", "--web-port=0", "--ephemeral-ports", "--ready-json"]
    argv.append(f"--data-path={tmp_path / 'data'}")
    with running(argv, tmp_path / "stderr.log", read="stdout") as box:
        assert box.stdout is not None
        ready = json.loads(read_line(box.stdout, box, "ready line"))
        nsqd = f"http://{ready['nsqd_http_address']}"
        with httpx.Client(timeout=TIMEOUT, trust_env=False) as http:
            for path in ("/topic/create", "/channel/create"):
                created = http.post(nsqd + path, params={"topic": "webshop", "channel": "audit"})
                assert created.status_code == 200, created.text
            bodies = [b'{"order": 7, "item": "teapot", "gift": true}', b"restock shelf 4"]
            published = http.post(
                f"{nsqd}/mpub", params={"topic": "webshop"}, content=b"\n".join(bodies)
            )
            assert published.status_code == 200, published.text
            later = b'{"order": 8, "item": "kettle", "retry": true}'
            params = {"topic": "webshop", "defer": "60000"}
            assert http.post(f"{nsqd}/pub", params=params, content=later).is_success

        browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CAPTURE})
        base, token = split_url(ready["tui_web_url"])
        browser.get(ready["tui_web_url"])
        wait_for_text(browser, "webshop", "Topic", "Channel")
        # the token became a cookie the page's scripts cannot read, and left the address bar
        assert browser.current_url == f"{base}/"
        [cookie] = browser.get_cookies()
        assert (cookie["value"], cookie["httpOnly"], cookie["sameSite"]) == (token, True, "Strict")
        # the terminal has the keyboard without a click
        focused = "return document.activeElement.classList.contains('xterm-helper-textarea')"
        assert browser.execute_script(focused) is True
        keys = browser.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea")
        keys.send_keys(Keys.ENTER)  # the topic
        wait_for_text(browser, "topics / webshop", "audit")
        keys.send_keys(Keys.ENTER)  # its channel
        wait_for_text(browser, "topics / webshop / audit", "Clients")
        keys.send_keys("m")  # the channel's messages
        text = wait_for_text(
            browser, "messages of channel audit of webshop", '{"order": 7', "restock", "Republish"
        )
        assert "deferred" in text
        if shot := os.environ.get("NSQBOX_WEB_SCREENSHOT"):
            browser.save_screenshot(shot)
        keys.send_keys(Keys.ENTER)  # the message, as pretty JSON
        wait_for_text(browser, "body: JSON", '"item": "teapot"', '"gift": true')

        with httpx.Client(timeout=TIMEOUT, trust_env=False) as http:
            stats = http.get(f"{nsqd}/stats", params={"format": "json"}).json()
        [topic] = stats["topics"]
        [channel] = topic["channels"]  # peeking took nothing
        assert (channel["depth"], channel["deferred_count"]) == (2, 1)
        assert len(tab_processes(ready["lookupd_http_address"])) == 1  # the open tab's
    # stopping the box (the tab still open) ends the tab's TUI
    wait_for(lambda: tab_processes(ready["lookupd_http_address"]) == [], timeout=TIMEOUT)


def test_tui_web_on_every_interface_warns_and_names_it(tmp_path: Path) -> None:
    argv = ["tui", "--web", "--web-host=0.0.0.0", "--web-port=0"]
    log = tmp_path / "stderr.log"
    with running(argv, log, read="stdout"):
        wait_for(lambda: "serving the TUI at" in log.read_text(), timeout=BROWSER_TIMEOUT)
        warning, line = log.read_text().splitlines()[:2]
        found = re.search(r"listens on 0\.0\.0\.0:(\d+), every interface", warning)
        assert found, warning
        port = found.group(1)
        assert "token" in warning
        # the URL names this machine (as every allowlist does), not loopback; the token stays
        url = re.search(r"serving the TUI at (\S+)", line)
        assert url, line
        base, token = split_url(url.group(1))
        assert base == f"http://{socket.gethostname().lower()}:{port}"
        # a page asked on loopback moves to that URL; without the token nothing is served
        loopback = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=TIMEOUT, trust_env=False) as http:
            moved = http.get(f"{loopback}/?token={token}")
            assert moved.status_code == 302
            assert moved.headers["location"] == f"{base}/?token={token}"
            assert http.get(f"{loopback}/ws").status_code == 403


def test_up_web_beyond_loopback_warns_before_the_banner(tmp_path: Path) -> None:
    argv = ["up", "--web", "--web-host=0.0.0.0", "--ephemeral-ports", "--ready-json"]
    argv.append(f"--data-path={tmp_path / 'data'}")
    with running(argv, tmp_path / "stderr.log", read="stdout") as box:
        assert box.stdout is not None
        ready = json.loads(read_line(box.stdout, box, "ready line"))
        base, _ = split_url(ready["tui_web_url"])
        port = base.rsplit(":", 1)[1]
        assert base == f"http://{socket.gethostname().lower()}:{port}"
    printed = (tmp_path / "stderr.log").read_text()
    assert f"nsqbox up: warning: the web TUI listens on 0.0.0.0:{port}, every interface" in (
        printed
    )
    assert f"admin TUI in a browser at {ready['tui_web_url']}" in printed
