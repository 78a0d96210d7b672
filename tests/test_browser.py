"""The built book in a real browser: every page loads, renders completely and stays offline.

Responsible for: serving the HTML of the strict build (the session fixture ``html`` of
tests/conftest.py, the same build tests/test_book.py reads) on 127.0.0.1, loading every page
in headless Chromium driven by Playwright, and failing on what a reader would see as broken:

- a broken image (an ``<img>`` that does not decode, or decodes to width 0);
- a broken internal link (a page that is not in the build) or anchor (``#id`` with no such
  id on the target page);
- an unfilled glue value (an empty ``pasted-text``, "n/a" where a number belongs, or the
  ``{glue:...}`` role left as text);
- an error output cell (``.output.traceback``, or ``.output.stderr`` with a traceback or an
  error name);
- a saved widget that does not render (a widget-view script with no widget DOM beside it);
- a formula left as LaTeX (a ``.math`` element without MathJax's ``mjx-container``, a MathJax
  error, or ``$$``, ``\\[``, ``\\(`` and ``\\begin{`` left in the text);
- a table of the book's own (not a plain DataFrame, nor one with columns per environment)
  wider than the page's column;
- a console error, an uncaught page error, an HTTP error status or a failed request;
- any request for something outside the served book: every request is routed, and one for
  another host is aborted and reported. This is the book's promise to render with no
  network (MathJax, fonts and widget scripts all come from _build/html).

A full-page screenshot of each page (the general index and search pages excepted) is kept under
_build/screenshots/, named after the page, for a person to look at.

:func:`check_book` does the checking and returns the problems it found, so that the second
test can break a copy of a page on purpose, one fault at a time, and show that each fault is
reported for the intended reason.

Not responsible for: building the book (tests/conftest.py), the numbers it quotes
(tests/test_book.py), or links to other sites, which are never fetched.

Needs Debian's ``chromium`` (scripts/system-packages.txt; `make setup` installs it as root) and
the ``playwright`` package (the ``test`` extra). Playwright drives that browser through
``executable_path`` and never downloads one of its own. Without either, the tests skip.
"""

from __future__ import annotations

import importlib
import os
import posixpath
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from iolab.paths import REPO_ROOT

CHROMIUM = Path(os.environ.get("IOLAB_CHROMIUM", "/usr/bin/chromium"))


def _why_not_runnable() -> str | None:
    try:
        importlib.import_module("playwright.sync_api")
    except ImportError:
        return ("the playwright package is missing from this environment: run "
                "`.venv/bin/pip install -e '.[test]'` (`make test` does when pyproject.toml "
                "changed)")
    if not CHROMIUM.exists():
        return (f"no Chromium at {CHROMIUM}: run `make setup` as root or "
                "`apt-get install chromium` (or set IOLAB_CHROMIUM to a Chromium binary)")
    return None


# Decided when the module is collected, so that a skip costs nothing: a fixture's skip would
# come only after the session fixture `html` had built the whole book.
WHY_NOT = _why_not_runnable()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")]

SCREENSHOTS = REPO_ROOT / "_build" / "screenshots"
# Folders of the build that hold assets and sources, not pages.
NOT_PAGES = {"_static", "_sources", "_images", "_downloads"}
# Generated pages with no chapter content: loaded and checked, but not photographed.
NO_SCREENSHOT = {"genindex.html", "search.html"}
# Waits. Widgets render from the window's load event, after the scripts have all arrived, so
# by the time the network is idle they are normally drawn; 5 s more covers a slow machine.
WIDGET_WAIT_MS = 5_000
PAGE_TIMEOUT_MS = 30_000


# -- serving -----------------------------------------------------------------------------

class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass  # pytest's output is for problems, not for an access log

    def do_GET(self):
        if (self.path.split("?")[0] == "/favicon.ico"
                and not (Path(self.directory) / "favicon.ico").exists()):
            # Chromium asks for /favicon.ico by itself, now and then, when a page names no
            # icon (the book names none); that 404 would be a console error no page caused
            self.send_response(204)
            self.end_headers()
            return
        super().do_GET()


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1 at a free port; yields the base URL, ending in '/'."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# -- what the build holds ----------------------------------------------------------------

def pages_of(root: Path) -> list[str]:
    """The HTML pages of a build, as paths relative to its root ('experiments/smt_thp.html')."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html")
                  if not NOT_PAGES & set(p.relative_to(root).parts[:-1]))


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            # an <a name=...> is a target too, as browsers treat it
            if value and (name == "id" or (name == "name" and tag == "a")):
                self.ids.add(value)


_REFRESH = re.compile(r'<meta\s+http-equiv="Refresh"\s+content="\d+;\s*url=([^"]+)"', re.I)


class _Targets:
    """Answers "does this internal URL exist in the build?", reading each page's ids once."""

    def __init__(self, root: Path, base: str) -> None:
        self.root, self.base = root.resolve(), base
        self._ids: dict[Path, set[str]] = {}

    def file(self, url: str) -> Path | None:
        path = unquote(urlsplit(url).path)
        target = (self.root / path.lstrip("/")).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_relative_to(self.root) or not target.is_file():
            return None
        return target

    def problem(self, url: str) -> str | None:
        """None when ``url`` (absolute, on the served host) resolves; else the problem."""
        target = self.file(url)
        shown = url.removeprefix(self.base)
        if target is None:
            return f"broken link: {shown} (no such file in the build)"
        fragment = unquote(urlsplit(url).fragment)
        if fragment and target.suffix == ".html":
            if target not in self._ids:
                parser = _Ids()
                parser.feed(target.read_text(errors="replace"))
                self._ids[target] = parser.ids
            if fragment not in self._ids[target]:
                return f"missing anchor: {shown} (no id {fragment!r} on that page)"
        return None


# -- the checks, in the page ---------------------------------------------------------------

# Scripts evaluated in each page. The two waits come first; each check after them returns
# a list with one entry per thing found wrong.
JS_WAIT_FOR_MATHJAX = """async () => {
  const mj = window.MathJax;
  // window.MathJax is only the configuration object until the MathJax script has run
  if (mj && mj.startup && mj.startup.promise) { await mj.startup.promise; return true; }
  return false;
}"""

JS_WIDGETS_RENDERED = """() => [...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')].every(s => {
  // the widget manager renders each view into a div.widget-subarea put before its script
  const area = s.previousElementSibling;
  return area && area.classList.contains('widget-subarea')
      && area.querySelector('.jupyter-widgets, [class*="widget-"]') !== null;
})"""

JS_UNRENDERED_WIDGETS = """() => [...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')].filter(s => {
  const area = s.previousElementSibling;
  return !(area && area.classList.contains('widget-subarea')
           && area.querySelector('.jupyter-widgets, [class*="widget-"]') !== null);
}).map(s => { try { return JSON.parse(s.textContent).model_id; } catch (e) { return '?'; } })"""

JS_BROKEN_IMAGES = """async () => {
  const images = [...document.images];
  // lazy images below the fold would never load in a headless check
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.decode().catch(() => null)));
  return images.filter(img => !img.complete || img.naturalWidth === 0)
               .map(img => img.getAttribute('src') || '(no src)');
}"""

JS_LINKS = """() => [...new Set([...document.querySelectorAll('a[href]')]
    .map(a => a.href).filter(h => h.startsWith(location.origin + '/')))]"""

JS_CONTENT_PROBLEMS = r"""() => {
  const found = [];
  const short = s => s.replace(/\s+/g, ' ').trim().slice(0, 120);
  // glue: MyST-NB puts every glued text in span.pasted-text; the notebooks glue "n/a" for a
  // key they could not fill, and a NumPy scalar would show its repr
  for (const el of document.querySelectorAll('.pasted-text, .pasted-inline')) {
    const text = el.textContent.trim();
    const media = el.querySelector('img, svg, canvas, table');
    if ((!text && !media) || /^(n\/a|nan|none|null|undefined)$/i.test(text)
        || /\bnp\.(float|int)\w*\(/.test(text)) {
      found.push(['unfilled glue', `${el.className} holds ${JSON.stringify(text)}`]);
    }
  }
  // error outputs: MyST-NB classes an error output .output.traceback and stderr .output.stderr
  for (const el of document.querySelectorAll('.output.traceback, .output.error')) {
    found.push(['error output', short(el.textContent)]);
  }
  for (const el of document.querySelectorAll('.output.stderr')) {
    if (/Traceback|\b\w*(Error|Exception)\b/.test(el.textContent)) {
      found.push(['error output', 'stderr: ' + short(el.textContent)]);
    }
  }
  for (const el of document.querySelectorAll('.cell_output')) {
    if (el.textContent.includes('Traceback (most recent call last)')
        && !el.querySelector('.output.traceback, .output.error, .output.stderr')) {
      found.push(['error output', short(el.textContent)]);
    }
  }
  // formulas: MathJax replaces the TeX of each .math element by an mjx-container
  for (const el of document.querySelectorAll('.math')) {
    if (!el.querySelector('mjx-container')) {
      found.push(['formula not typeset', short(el.textContent)]);
    }
  }
  for (const el of document.querySelectorAll('mjx-merror')) {
    found.push(['formula not typeset', 'MathJax error: ' + short(el.textContent)]);
  }
  // text a reader sees that is still markup: TeX delimiters, a glue role never parsed
  const skip = 'script, style, pre, code, kbd, samp, textarea, .highlight, mjx-container, .math';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest(skip)) continue;
    const text = node.textContent;
    if (/\$\$|\\\[|\\\(|\\begin\{/.test(text)) found.push(['raw LaTeX', short(text)]);
    if (/\{glue(:\w+)?\}`/.test(text)) found.push(['unfilled glue', short(text)]);
  }
  // a table of the book's own wider than the page's column (book/_static/wrap.css makes them
  // fit; a plain DataFrame, class "dataframe", and one with columns per environment, class
  // "wide", may scroll sideways)
  const column = document.querySelector('article');
  const room = column ? column.getBoundingClientRect().width : 0;
  for (const el of column ? column.querySelectorAll('table:not(.dataframe):not(.wide)') : []) {
    if (el.scrollWidth > room + 1) {
      found.push(['table wider than the page', `${Math.round(el.scrollWidth)} px in a column `
                  + `of ${Math.round(room)} px: ` + short(el.textContent).slice(0, 60)]);
    }
  }
  return found.map(([kind, detail]) => kind + ': ' + detail);
}"""


def _load_and_check(context, base: str, page_name: str, targets: _Targets,
                    screenshot: Path | None, report: Callable[[str], None]) -> None:
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.on("console", lambda msg: msg.type == "error" and report(
        f"console error: {msg.text} ({msg.location.get('url', '')})"))
    page.on("pageerror", lambda error: report(f"page error: {error}"))
    page.on("response", lambda response: response.status >= 400 and report(
        f"HTTP {response.status}: {response.url.removeprefix(base)}"))
    page.on("requestfailed", lambda request: request.url.startswith(base) and report(
        f"request failed: {request.url.removeprefix(base)} ({request.failure})"))
    try:
        response = page.goto(base + page_name, wait_until="load")
        if response is None or not response.ok:
            report(f"HTTP {response.status if response else '?'} for the page itself")
            return
        # scripts that fetch after the load event (thebe, analytics, fonts) show up here
        page.wait_for_load_state("networkidle")
        page.evaluate(JS_WAIT_FOR_MATHJAX)
        if page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count():
            try:
                page.wait_for_function(JS_WIDGETS_RENDERED, timeout=WIDGET_WAIT_MS)
            except Exception:  # playwright's TimeoutError; reported below by model id
                pass
            for model in page.evaluate(JS_UNRENDERED_WIDGETS):
                report(f"widget not rendered: model {model}")
        for src in page.evaluate(JS_BROKEN_IMAGES):
            report(f"broken image: {src}")
        for problem in page.evaluate(JS_CONTENT_PROBLEMS):
            report(problem)
        for url in page.evaluate(JS_LINKS):
            if (problem := targets.problem(url)) is not None:
                report(problem)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
    finally:
        page.close()


def check_book(root: Path, browser, pages: Iterable[str] | None = None,
               screenshots: Path | None = None) -> list[str]:
    """Serve the build at ``root`` on loopback, load ``pages`` (default: every page) in one
    context of ``browser`` in turn, and return the problems found, each as
    "<page>: <kind>: <detail>" (an empty list for a sound book). With ``screenshots``, a
    full-page PNG of each page goes there, at the page's path with .png for .html."""
    problems: list[str] = []
    current = {"page": "?"}

    def report(problem: str) -> None:
        problems.append(f"{current['page']}: {problem}")

    with serve(root) as base:
        targets = _Targets(root, base)

        def route(route) -> None:
            url = route.request.url
            if url.startswith(base) or urlsplit(url).scheme in ("data", "blob", "about"):
                route.continue_()
            else:
                # the book must render with no network: stop the request and name it
                report(f"outside request: {url}")
                route.abort("blockedbyclient")

        context = browser.new_context(viewport={"width": 1280, "height": 900},
                                      service_workers="block")
        context.route("**/*", route)
        try:
            for name in pages_of(root) if pages is None else pages:
                current["page"] = name
                text = (root / name).read_text(errors="replace")
                if refresh := _REFRESH.search(text[:2000]):
                    # a redirect page (Jupyter Book's index.html): its target must exist
                    target = posixpath.normpath(
                        posixpath.join(posixpath.dirname(name), refresh.group(1)))
                    if (problem := targets.problem(base + target)) is not None:
                        report(problem)
                    continue
                shot = None
                if screenshots is not None and name not in NO_SCREENSHOT:
                    shot = screenshots / Path(name).with_suffix(".png")
                _load_and_check(context, base, name, targets, shot, report)
        finally:
            context.close()
    return problems


# -- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium under Playwright, headless (the module is skipped without either)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                              args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


# -- the tests -----------------------------------------------------------------------------

def test_every_page_renders_completely_offline(browser, html):
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)  # no picture of a page that is gone
    problems = check_book(html, browser, screenshots=SCREENSHOTS)
    assert not problems, f"{len(problems)} problem(s) in the built book:\n" + "\n".join(problems)
    assert (SCREENSHOTS / "framework.png").is_file()


# The pages the faults are put into: a short one without MathJax (quick to load) for most,
# the one with the book's formulas for the formula faults, and the one with saved widgets.
BASE_PAGE = "references.html"
MATH_PAGE = "framework.html"
WIDGET_PAGE = "experiments/smt_thp.html"
TRACEBACK = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
             "ZeroDivisionError: division by zero")


def _insert(html_text: str, snippet: str) -> str:
    # into the chapter's own content, where MyST-NB and MathJax settings apply
    marker = '<section class="tex2jax_ignore mathjax_ignore"'
    at = html_text.index(marker)
    at = html_text.index(">", at) + 1
    return html_text[:at] + snippet + html_text[at:]


FAULTS = {
    # fault name: (page to copy, how to break it, the kind of problem that must be reported)
    "image-missing": (BASE_PAGE, lambda t: _insert(
        t, '<img src="_images/no-such-figure.png" alt="a figure">'), "broken image"),
    "link-to-missing-page": (BASE_PAGE, lambda t: _insert(
        t, '<a href="experiments/no-such-chapter.html">gone</a>'), "broken link"),
    "link-to-missing-anchor": (BASE_PAGE, lambda t: _insert(
        t, '<a href="architecture.html#no-such-section">gone</a>'), "missing anchor"),
    "glue-not-filled": (BASE_PAGE, lambda t: _insert(
        t, '<p>The mean is <span class="pasted-text">n/a</span> IOPS.</p>'), "unfilled glue"),
    "glue-role-as-text": (BASE_PAGE, lambda t: _insert(
        t, "<p>The mean is {glue:text}`iops_mean` IOPS.</p>"), "unfilled glue"),
    "error-output": (BASE_PAGE, lambda t: _insert(
        t, '<div class="cell_output docutils container"><div class="output traceback '
           f'highlight-ipythontb notranslate"><pre>{TRACEBACK}</pre></div></div>'),
        "error output"),
    "stderr-traceback": (BASE_PAGE, lambda t: _insert(
        t, '<div class="cell_output docutils container"><div class="output stderr '
           f'highlight-myst-ansi notranslate"><pre>{TRACEBACK}</pre></div></div>'),
        "error output"),
    "latex-left-raw": (MATH_PAGE, lambda t: _insert(t, "<p>$$x^2 + y^2$$</p>"), "raw LaTeX"),
    "mathjax-missing": (MATH_PAGE, lambda t: t.replace(
        "_static/mathjax/tex-chtml.js", "_static/mathjax/not-there.js"), "formula not typeset"),
    "table-too-wide": (BASE_PAGE, lambda t: _insert(
        t, '<table class="table"><tr><td><span style="display: inline-block; width: 4000px">'
           'wide</span></td></tr></table>'), "table wider than the page"),
    "console-error": (BASE_PAGE, lambda t: _insert(
        t, '<script>console.error("injected fault")</script>'), "console error"),
    "script-throws": (BASE_PAGE, lambda t: _insert(
        t, '<script>throw new Error("injected fault")</script>'), "page error"),
    "outside-request": (BASE_PAGE, lambda t: _insert(
        t, '<img src="https://example.com/x.png" alt="from elsewhere">'), "outside request"),
    "widget-not-rendered": (WIDGET_PAGE, lambda t: re.sub(
        r'<script src="[^"]*widgets/embed-amd\.js[^"]*"></script>', "", t),
        "widget not rendered"),
}


def _broken_name(fault: str) -> str:
    # beside the page it copies, so that its relative links and assets still resolve
    page = BASE_PAGE if fault == "none" else FAULTS[fault][0]
    return Path(page).with_name(f"broken-{fault}.html").as_posix()


@pytest.fixture(scope="module")
def broken_book(browser, html, tmp_path_factory):
    """A copy of the built HTML with one page per fault, each a copy of a real page with that
    fault put in (and one copy left as it is), all checked in one pass: the problems found,
    by page."""
    root = tmp_path_factory.mktemp("broken-book") / "html"
    shutil.copytree(html, root)
    for fault in ["none", *FAULTS]:
        page, break_it, _ = FAULTS.get(fault, (BASE_PAGE, lambda t: t, None))
        original = (root / page).read_text()
        broken = break_it(original)
        assert fault == "none" or broken != original, f"the fault {fault!r} changed nothing"
        (root / _broken_name(fault)).write_text(broken)
    names = [_broken_name(fault) for fault in ["none", *FAULTS]]
    problems = check_book(root, browser, pages=names)
    return {name: [p for p in problems if p.startswith(f"{name}: ")] for name in names}


@pytest.mark.parametrize("fault", ["none", *FAULTS])
def test_a_page_broken_on_purpose_is_reported(broken_book, fault):
    name = _broken_name(fault)
    problems = broken_book[name]
    if fault == "none":
        # the page as built, copied: what a fault adds is that fault's doing alone
        assert problems == []
        return
    kind = FAULTS[fault][2]
    assert any(p.startswith(f"{name}: {kind}: ") for p in problems), (
        f"{fault}: expected a {kind!r} problem, got:\n" + "\n".join(problems or ["nothing"]))
