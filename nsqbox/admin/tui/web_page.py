"""The web TUI's page: textual-serve's, with nothing fetched off the machine.

textual-serve's own template asks Google Fonts for a stylesheet (a request off the machine on
every load) and shows a bare panel until the TUI draws. This page loads only the server's own
static files (xterm.js and its CSS, the Roboto Mono font textual-serve ships), says that the
TUI is starting, and gives the terminal the keyboard as soon as it draws, so keys work without
a click first. Its websocket URL is given by the server (:mod:`.web_access`: the server's own
address, never the request's ``Host``).
"""

from __future__ import annotations

from html import escape
from string import Template

__all__ = ["render_page"]

_PAGE = Template("""<!DOCTYPE html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>$title</title>
    <link rel="stylesheet" href="${static}css/xterm.css" />
    <script src="${static}js/textual.js"></script>
    <style>
      @font-face {
        font-family: "Roboto Mono";
        src: url("${static}fonts/RobotoMono-VariableFont_wght.ttf") format("truetype");
        font-style: normal;
      }
      @font-face {
        font-family: "Roboto Mono";
        src: url("${static}fonts/RobotoMono-Italic-VariableFont_wght.ttf") format("truetype");
        font-style: italic;
      }
      body { background: #0c181f; margin: 0; }
      .dialog-container {
        position: absolute; width: 100vw; height: 100vh; display: flex;
        align-items: center; justify-content: center; z-index: 10;
      }
      .intro {
        width: 640px; height: 240px; font-size: 16px; z-index: 20;
        font-family: "Roboto Mono", menlo, monospace; text-align: center;
        color: rgba(255, 255, 255, 0.95); background-color: #12232d;
        display: flex; flex-direction: column; align-items: center; justify-content: center;
      }
      body.-first-byte .intro-dialog { display: none; }
      body .textual-terminal { opacity: 0; transition: opacity 0.3s ease-out; }
      body.-first-byte .textual-terminal { opacity: 1; }
      body button {
        padding: 16px 32px; background-color: #5e0ba7; color: rgba(255, 255, 255, 0.95);
        border: none; font-family: "Roboto Mono", menlo, monospace; margin: 16px;
      }
      button:hover { background: #ac5af4; cursor: pointer; }
      .closed-dialog { display: none; }
      body.-closed .closed-dialog { display: flex; }
      #start { display: none; }
      #start.-delay { display: block; }
    </style>
    <script>
      function getStartUrl() {
        const url = new URL(window.location.href);
        const params = new URLSearchParams(url.search);
        params.delete("delay");
        return url.pathname + "?" + params.toString();
      }
      function refresh() {
        window.location.href = getStartUrl();
      }
    </script>
  </head>
  <body>
    <div class="dialog-container intro-dialog">
      <div class="intro">
        <div>$title</div>
        <div class="loading">starting the TUI&hellip;</div>
        <button type="button" onClick="refresh()" id="start">Start</button>
      </div>
    </div>
    <div class="dialog-container closed-dialog">
      <div class="intro">
        <div class="message">Session ended.</div>
        <button type="button" onClick="refresh()">Restart</button>
      </div>
    </div>
    <div
      id="terminal"
      class="textual-terminal"
      data-session-websocket-url="$websocket"
      data-font-size="$font_size"
    ></div>
    <script>
      // Give the terminal the keyboard once the TUI draws (no click needed first).
      new MutationObserver((records, observer) => {
        const keys = document.querySelector(".xterm-helper-textarea");
        if (keys && document.body.classList.contains("-first-byte")) {
          keys.focus();
          observer.disconnect();
        }
      }).observe(document.body, { attributes: true, childList: true, subtree: true });
    </script>
  </body>
</html>
""")


def render_page(*, title: str, static_url: str, websocket_url: str, font_size: int) -> str:
    """The page's HTML: ``static_url`` ends with ``/``; every value is HTML-escaped."""
    return _PAGE.substitute(
        title=escape(title),
        static=escape(static_url),
        websocket=escape(websocket_url),
        font_size=font_size,
    )
