"""A built site opened in a real browser: headless Chromium driven by Selenium, pages served on localhost.

For every HTML page of the site: it loads; every image loads (``naturalWidth > 0``); every math element is typeset
(MathJax 3 has rendered each ``span.math`` and ``div.math`` that Sphinx writes into an ``mjx-container``); every
link into the site resolves to a file, and a link with ``#anchor`` to an element with that id; the browser's console
shows no error.  Chromium is the Debian package (``/usr/bin/chromium`` with ``/usr/bin/chromedriver``), started
with the flags that keep it off the network.
"""

from __future__ import annotations

import functools
import http.server
import posixpath
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

from scp.errors import MissingFileError

CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1600",
)

_PAGE_STATE = """
const imgs = Array.from(document.images);
const maths = Array.from(document.querySelectorAll('span.math, div.math'));
const ids = Array.from(document.querySelectorAll('[id]')).map(e => e.id);
return {
  title: document.title,
  images: imgs.map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0]),
  math: maths.length,
  typeset: maths.filter(m => m.querySelector('mjx-container')).length,
  raw_tex: maths.filter(m => !m.querySelector('mjx-container')).length,
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href')),
  ids: ids,
};
"""


@dataclass
class SiteReport:
    """What the browser saw: pages, images, math elements, links checked, and every problem as one line."""

    pages: int = 0
    images: int = 0
    math: int = 0
    links: int = 0
    problems: list[str] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        head = f"{self.pages} pages, {self.images} images, {self.math} math elements, {self.links} internal links: " + (
            "all load, typeset and resolve; no console error" if self.ok else f"{len(self.problems)} problems"
        )
        return "\n".join([head, *(f"  {p}" for p in self.problems), *(f"  screenshot: {s}" for s in self.screenshots)])


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no request log on stderr
        pass


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """``root`` served over HTTP on a free localhost port; yields the base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def chromium():
    """A headless Chromium driven by Selenium (the Debian chromium and chromium-driver packages)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium") or "/usr/bin/chromium", shutil.which("chromedriver")
    if not Path(binary).is_file() or driver is None:
        raise MissingFileError("headless Chromium is missing: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument("--user-data-dir=" + _profile())
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def _profile() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="scp-chromium-")


def _wait_for_math(browser, timeout: float = 30.0) -> None:
    """Until the page has loaded and, where it holds math, MathJax 3 has typeset it."""
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, timeout)
    wait.until(lambda b: b.execute_script("return document.readyState") == "complete")
    if browser.execute_script("return document.querySelector('span.math, div.math') !== null"):
        wait.until(
            lambda b: b.execute_script("return !!(window.MathJax && MathJax.startup && MathJax.startup.promise)")
        )
        browser.set_script_timeout(timeout)
        browser.execute_async_script(
            "const done = arguments[arguments.length - 1]; MathJax.startup.promise.then(() => done(1));"
        )


def check_site(html: Path, screenshots: Sequence[str] = (), shots_dir: Path | None = None) -> SiteReport:
    """Open every page of the site under ``html`` and check it (see the module docstring); ``screenshots``:
    pages (paths relative to ``html``) to save as PNG under ``shots_dir``."""
    html = Path(html)
    pages = sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html") if "_static" not in p.parts)
    pages = [p for p in pages if p not in ("genindex.html", "search.html")]
    if not pages:
        raise MissingFileError(f"no HTML pages under {html}: build the site first (make book)")
    report = SiteReport(pages=len(pages))
    ids: dict[str, set[str]] = {}
    links: list[tuple[str, str]] = []
    with serve(html) as base, _closing(chromium()) as browser:
        for page in pages:
            browser.get(base + page)
            _wait_for_math(browser)
            state = browser.execute_script(_PAGE_STATE)
            ids[page] = set(state["ids"])
            report.images += len(state["images"])
            report.math += state["math"]
            report.problems += [f"{page}: image {src} does not load" for src, ok in state["images"] if not ok]
            if state["math"] and not state["typeset"]:
                report.problems.append(f"{page}: {state['math']} math elements, none typeset by MathJax")
            if state["raw_tex"]:
                report.problems.append(f"{page}: {state['raw_tex']} math elements left as raw TeX")
            for entry in browser.get_log("browser"):
                if entry.get("level") == "SEVERE":
                    report.problems.append(f"{page}: console error: {entry.get('message', '')[:200]}")
            links += [(page, href) for href in state["links"]]
            if page in screenshots and shots_dir is not None:
                shots_dir.mkdir(parents=True, exist_ok=True)
                shot = shots_dir / (page.replace("/", "__").removesuffix(".html") + ".png")
                browser.execute_script(  # a page with figures is shown at its first figure
                    "const i = document.querySelector('main img'); if (i) i.scrollIntoView({block: 'start'});"
                )
                browser.save_screenshot(str(shot))
                report.screenshots.append(shot)
    for page, href in links:
        parsed = urlparse(href)
        if parsed.scheme or parsed.netloc or href.startswith(("mailto:", "javascript:")):
            continue
        url, anchor = urldefrag(href)
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page), unquote(url))) if url else page
        path = (html / target).resolve()
        if path.is_dir():
            path, target = path / "index.html", f"{target.rstrip('/')}/index.html"
        report.links += 1
        if not path.is_file() or not path.is_relative_to(html.resolve()):
            report.problems.append(f"{page}: link {href} resolves to no file")
        elif anchor and target.endswith(".html") and target in ids and anchor not in ids[target]:
            report.problems.append(f"{page}: link {href}: no element with id {anchor!r} on {target}")
    return report


@contextmanager
def _closing(browser):
    try:
        yield browser
    finally:
        browser.quit()
