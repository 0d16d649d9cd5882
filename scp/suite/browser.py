"""A built site opened in a real browser: headless Chromium driven by Selenium, pages served on localhost.

For every HTML page of the site: it loads; every image loads (``naturalWidth > 0``); every math element is typeset
(MathJax 3 has rendered each ``span.math`` and ``div.math`` that Sphinx writes into an ``mjx-container``); every
link into the site resolves to a file, and a link with ``#anchor`` to an element with that id; the browser's console
shows no error.  And what a reader should not meet (:func:`_reading_problems`): a temporary or home path of the
machine in a page's text, a visible parameter cell, code that scrolls sideways, two search boxes, a page without
its provenance.  Chromium is the Debian package (``/usr/bin/chromium`` with ``/usr/bin/chromedriver``), started
with the flags that keep it off the network.
"""

from __future__ import annotations

import functools
import http.server
import posixpath
import re
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

MACHINE_PATH = re.compile(
    r"(?<![\w.~/$-])(?:/tmp|/var/tmp|/var/folders|/private/var|/private/tmp|/root|/home/[^/\s]+|/Users/[^/\s]+)"
    r"/[^\s'\"<>()\[\]]*"
    r"|(?:/[^\s/'\"<>()\[\]]+)+/runs/(?:scratch|check|smoke)/[^\s'\"<>()\[\]]*"
)
"""A temporary or home folder's path (``/tmp/…``, ``/root/…``, ``/home/USER/…``) or a runner's scratch folder in a
checkout (``/…/runs/scratch/…``): the machine a page was made on, which no page shows (``~/…`` and a bare ``/tmp``,
as documentation writes them, are not such paths)."""

_PAGE_STATE = """
const shown = e => (e.checkVisibility ? e.checkVisibility({visibilityProperty: true, opacityProperty: true})
  : e.getClientRects().length > 0) && !e.closest('details:not([open]) > :not(summary)');
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
  text: document.body ? document.body.textContent : '',
  parameters: Array.from(document.querySelectorAll(
      '.cell.tag_parameters .cell_input, .cell.tag_injected-parameters .cell_input, pre'))
    .filter(e => e.tagName !== 'PRE' || /^\\s*# Parameters\\n/.test(e.textContent))
    .filter(shown).length,
  sideways: Array.from(document.querySelectorAll('pre')).filter(shown)
    .filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.textContent.trim().split("\\n")[0].slice(0, 60)),
  provenance: !document.querySelector('article.bd-article') || !!document.querySelector('.scp-provenance'),
  searches: Array.from(document.querySelectorAll('.search-button-field, input[type=search]')).filter(shown).length,
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

    def handle(self) -> None:  # a request the browser dropped halfway (it left the page) is no error of the site
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
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
    pages (paths relative to ``html``, ``page#anchor`` for the part of a page from that element on) to save as PNG
    under ``shots_dir``."""
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
            report.problems += _reading_problems(page, state)
            links += [(page, href) for href in state["links"]]
            for wanted in [s for s in screenshots if urldefrag(s)[0] == page and shots_dir is not None]:
                report.screenshots.append(_screenshot(browser, wanted, shots_dir))
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


def _reading_problems(page: str, state: dict) -> list[str]:
    """What a reader should not meet on a page: a machine's temporary or home path in its text, a visible parameter
    cell (the notebook's ``parameters`` cell or papermill's injected one), code that scrolls sideways, more than one
    search box, a page of the book (``article.bd-article``) without its provenance note."""
    problems = []
    paths = MACHINE_PATH.findall(state["text"])
    if paths:
        problems.append(f"{page}: {len(paths)} temporary or home paths in its text (first: {paths[0][:100]})")
    if state["parameters"]:
        problems.append(f"{page}: {state['parameters']} parameter cells visible")
    if state["sideways"]:
        problems.append(
            f"{page}: {len(state['sideways'])} code blocks scroll sideways (first: {state['sideways'][0]!r})"
        )
    if state["searches"] > 1:
        problems.append(f"{page}: {state['searches']} search boxes")
    if not state["provenance"]:
        problems.append(f"{page}: no provenance note (.scp-provenance)")
    return problems


def _screenshot(browser, wanted: str, shots_dir: Path) -> Path:
    """A PNG of the page in the browser: its top, or with ``page#anchor`` the element of that id at the top."""
    page, anchor = urldefrag(wanted)
    shots_dir.mkdir(parents=True, exist_ok=True)
    shot = shots_dir / (page.replace("/", "__").removesuffix(".html") + (f"__{anchor}" if anchor else "") + ".png")
    browser.execute_script(  # the page at its top or at the anchor; the sidebar at the page's own entry
        "const e = arguments[0] && document.getElementById(arguments[0]);"
        "if (e) { e.scrollIntoView({block: 'start'}); } else { window.scrollTo(0, 0); }"
        "const bar = Array.from(document.querySelectorAll('#pst-primary-sidebar, #pst-primary-sidebar *'))"
        "  .find(b => b.scrollHeight > b.clientHeight + 1 && getComputedStyle(b).overflowY !== 'visible');"
        "const here = bar && bar.querySelector('li.current > a, a.current');"
        "if (bar) { bar.scrollTop = here ? Math.max(0, here.getBoundingClientRect().top"
        " - bar.getBoundingClientRect().top + bar.scrollTop - bar.clientHeight / 3) : 0; }",
        anchor,
    )
    browser.save_screenshot(str(shot))
    return shot


@contextmanager
def _closing(browser):
    try:
        yield browser
    finally:
        browser.quit()
