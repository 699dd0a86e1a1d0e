"""The book (web/), in both editions (English at the root, Chinese in zh/): the site is built by the engine (Sphinx,
MyST-NB, sphinx-book-theme) from the notebooks the suite already executes (the `executed` fixture, shared with
tests/test_notebooks.py), then checked as files (every page, every link, the executed notebooks to download,
nothing of the judge's secrets) and opened page by page in headless Chromium (Debian's chromium and
chromium-driver, driven by selenium) at a phone's width: no console error, no sideways scroll, every image loaded,
the sidebar and the page's contents, formulas rendered, a copy button on code, headings clear of the header, each
chapter page printing what its script prints and drawing its figures, and the search ranking the chapter that
treats a subject first. Where no Chromium is installed, the browser tests are skipped, saying so."""
import html
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
import tomllib

from helpers import FIGURES, MODE_DEPENDENT, ROOT, masked, notebook_of_cells, shared_stdout
from web import execute, source
from web.build import build_site

SCRIPTS = [p.stem for p in sorted((ROOT / "chapters").glob("ch[0-9][0-9]_*.py"))]

PROBLEMS = sorted(p for p in (ROOT / "practice").glob("[0-9][0-9][0-9]_*") if (p / "README.md").is_file())
EDITIONS = {"en": "", "zh": "zh/"}  # where each edition's pages are, from the site's root
README = {"en": "README.md", "zh": "README.zh.md"}
SYNTHETIC = {"en": "Synthetic weights", "zh": "合成权重"}  # what the banner of each edition says
PAGES = ["index.html", "exercises/index.html", *(f"chapters/{s}.html" for s in SCRIPTS),
         *(f"exercises/{p.name[:3]}.html" for p in PROBLEMS)]
REPOSITORY = "https://github.com/example/qwen-by-hand"
# The first test to ask for the site runs every chapter's notebook in both languages that the notebook tests have not
# run yet, then builds the site: over the 300 s a test gets (13 chapters, measured 310 s with -n 2 and nothing run
# before). A hung cell is still stopped by the per-cell timeout (web/execute.py's SECONDS).
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def site(executed, synthetic, tmp_path_factory):
    editions = {}
    for code in EDITIONS:
        editions[code] = {}
        for name in SCRIPTS:
            nb, error = executed(name, code)
            assert error is None, error
            editions[code][name] = nb
    said = []
    index = build_site(editions, str(synthetic), tmp_path_factory.mktemp("book") / "site",
                       tmp_path_factory.mktemp("sphinx"), repository=REPOSITORY, commit="abc1234", branch="main",
                       say=lambda line, **_: said.append(line))
    warnings = [line for line in said if "WARNING" in line or "ERROR" in line]
    assert warnings == [], "\n".join(warnings)  # the engine read every page without a complaint
    return index.parent


def plain_text(html_text):
    """Words of a piece of HTML, as a reader sees them."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", html_text))).strip()


class _Page(HTMLParser):
    """The ids and the addresses (href, src) of one page."""
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for key in ("href", "src"):
            if attrs.get(key):
                self.links.append(attrs[key])


def parsed(path):
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.mark.slow
def test_every_page_is_built(site):
    """The index, a page per chapter, the exercises' index and a page per exercise, and the engine's search and
    index pages: nothing else."""
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if "_static" not in p.parts)
    assert pages == sorted(f"{where}{page}" for where in EDITIONS.values()
                           for page in [*PAGES, "search.html", "genindex.html"])
    assert len(SCRIPTS) == 13 and len(PROBLEMS) == 26


def test_nothing_of_the_old_builder_is_left():
    """The engine lays out the pages, renders markdown, highlights code and searches: web/ keeps what is ours
    (running the notebooks, writing each edition's sources, the formulas as MathML, the settings)."""
    ours = {"__init__.py", "__main__.py", "build.py", "conf.py", "execute.py", "mathml.py", "source.py", "warm.py"}
    assert {p.name for p in (ROOT / "web").glob("*.py")} == ours
    assert not list((ROOT / "web").glob("*.html")) and not (ROOT / "web" / "static" / "search.js").exists()


@pytest.mark.slow
def test_every_internal_link_resolves(site):
    """Every href and src of every page that stays on the site or in the checkout: a file that exists, and an
    anchor that its page has. Other addresses are the repository's, Colab's and the engine's own."""
    ids = {}
    for page in (p for p in site.rglob("*.html") if "_static" not in p.parts):  # the theme's templates are no pages
        for link in parsed(page).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                assert parts.scheme == "https", f"{page.name}: {link}"
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.exists(), f"{page.relative_to(site)}: {link} does not resolve"
            if parts.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = parsed(target).ids
                assert parts.fragment in ids[target], f"{page.relative_to(site)}: no #{parts.fragment} in {link}"


@pytest.mark.slow
def test_chapter_pages_link_their_files_exercises_repository_and_colab(site):
    page = site / "chapters" / "ch03_norm.html"
    ch03 = page.read_text(encoding="utf-8")
    links = parsed(page).links
    for path in ("chapters/ch03_norm.py", "notebooks/ch03_norm.ipynb", "qwen/norm.py", "book/ch03.py"):
        assert f"{REPOSITORY}/blob/abc1234/{path}" in links, path
    assert f"{REPOSITORY}/edit/main/chapters/ch03_norm.py" in links  # the one source, not the notebook
    assert "https://colab.research.google.com/github/example/qwen-by-hand/blob/abc1234/notebooks/ch03_norm.ipynb" \
        in links
    zh = parsed(site / "zh" / "chapters" / "ch03_norm.html").links
    assert "https://colab.research.google.com/github/example/qwen-by-hand/blob/abc1234/notebooks/zh/ch03_norm.ipynb" \
        in zh
    # "exercise 204" and "205" in the prose link to their pages, in code they stay code
    assert re.search(r'exercise <a class="reference internal" href="../exercises/204.html"[^>]*>'
                     r'<span class="std std-doc">204</span></a>', ch03), "exercise 204 is not linked"
    assert "../exercises/205.html" in links
    assert "practice/judge.py start 204" in plain_text(ch03)
    # the language switch: the same page in the other edition, and back
    assert "../zh/chapters/ch03_norm.html" in links and "../../chapters/ch03_norm.html" in zh


@pytest.mark.slow
@pytest.mark.parametrize("code", EDITIONS)
def test_the_executed_notebook_is_there_to_download(site, code, executed):
    """The download button hands out the chapter's notebook as the build ran it: its outputs are the run's."""
    page = site / f"{EDITIONS[code]}chapters/ch03_norm.html"
    assert "../_sources/chapters/ch03_norm.ipynb" in parsed(page).links
    nb = nbformat.read(site / f"{EDITIONS[code]}_sources/chapters/ch03_norm.ipynb", as_version=4)
    assert masked(shared_stdout(nb)) == masked(shared_stdout(executed("ch03_norm", code)[0]))


@pytest.mark.slow
@pytest.mark.parametrize("code", EDITIONS)
def test_exercise_pages_show_the_statement_and_keep_the_judge_secret(site, code):
    """Each exercise page: its statement (in the edition's language), the signatures and the worked example, and
    the commands that grade it; none of its hidden cases' description and none of its hints (they would spoil the
    judge)."""
    for folder in PROBLEMS:
        number = folder.name[:3]
        page = (site / f"{EDITIONS[code]}exercises/{number}.html").read_text(encoding="utf-8")
        article = page[page.index('<article class="bd-article">'):page.index("</article>")]
        readme = (folder / README[code]).read_text(encoding="utf-8")
        signature = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
        text = plain_text(article)
        squeezed = re.sub(r"\s", "", text)  # highlighted code: a span per token
        for line in signature.splitlines():
            assert re.sub(r"\s", "", line) in squeezed, (number, line)
        assert f"pythonpractice/judge.pystart{number}" in squeezed and f"pythonpractice/judge.py{number}#" in squeezed
        grading = re.split(r"^## (?:Grading|评测|评分)", readme, flags=re.M)
        for sentence in re.findall(r"[^.。\n]{20,}", grading[1] if len(grading) > 1 else "")[:5]:
            assert re.sub(r"\s", "", plain_text(sentence)) not in squeezed, (number, sentence)
        mistakes = folder / "mistakes.toml"
        if mistakes.is_file():
            for entry in tomllib.loads(mistakes.read_text(encoding="utf-8")).values():
                if isinstance(entry, dict) and entry.get(code):
                    assert entry[code][:40] not in text, (number, entry[code])


def test_markdown_links_exercises_outside_code_and_formulas_only():
    text = source.link_exercises("exercise 204 asks; `exercise 204` stays; $exercise 204$ too; **Exercises**: "
                                 "210 · a; 211 · b; 999 · c", {204: "e/204.md", 210: "e/210.md", 211: "e/211.md"})
    assert text == ("exercise [204](e/204.md) asks; `exercise 204` stays; $exercise 204$ too; **Exercises**: "
                    "[210](e/210.md) · a; [211](e/211.md) · b; 999 · c")


def test_a_figure_is_captioned_and_a_listing_is_code():
    """A figure's title becomes its caption (markdown in it escaped) and alt text, its name the anchor; a listing
    becomes a Python code block under the module's name; printed lines stay as the run printed them."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("book.show(...)", outputs=[
        nbformat.v4.new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"},
                               metadata={"book": {"figure": "ch03-rms", "title": "RMS of *x*\nbefore_after"}})]),
        nbformat.v4.new_code_cell("book.listing(...)", outputs=[
            nbformat.v4.new_output("display_data", data={"text/plain": "def f():\n    pass", "text/html": "<style>"},
                                   metadata={"book": {"listing": "qwen/norm.py", "names": ["f"]}}),
            nbformat.v4.new_output("stream", name="stdout", text="printed *as is*\n")])])
    shown = source.chapter_notebook(nb, {})
    assert shown.cells[0].metadata["mystnb"] == {
        "figure": {"caption": r"RMS of \*x\* · before\_after", "name": "fig-ch03-rms"},
        "image": {"alt": "RMS of *x* · before_after"}}
    assert shown.cells[1].outputs[0]["data"] == {
        "text/markdown": "**qwen/norm.py (f)**\n\n````python\ndef f():\n    pass\n````\n"}
    assert shown.cells[1].outputs[1]["text"] == "printed *as is*\n"
    assert "mystnb" not in nb.cells[0].metadata  # the executed notebook itself is left as it ran


def test_a_line_the_kernel_sent_in_two_chunks_reads_back_whole():
    """The kernel flushes stdout on a timer, so print("a") can arrive as "a" and then "\\n": the chunks of one
    stream are joined, exactly, and only where nothing came between them (a figure, the other stream)."""
    cell = nbformat.v4.new_code_cell("...", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="a"),
        nbformat.v4.new_output("stream", name="stdout", text="\nb\n\n"),
        nbformat.v4.new_output("stream", name="stderr", text="note\n"),
        nbformat.v4.new_output("stream", name="stdout", text="\nc\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "x"}),
        nbformat.v4.new_output("stream", name="stdout", text="d\n")])
    shown = source.chapter_notebook(nbformat.v4.new_notebook(cells=[cell]), {}).cells[0].outputs
    assert [(o.output_type, o.get("text")) for o in shown] == [
        ("stream", "a\nb\n\n"), ("stream", "note\n"), ("stream", "\nc\n"), ("display_data", None), ("stream", "d\n")]


def test_formulas_become_mathml_inline_and_displayed():
    """The formula renderer: TeX in, MathML out (inline and display); latex2mathml is the oracle for the markup."""
    from latex2mathml.converter import convert

    from web import mathml

    class Writer:
        body = []

    from docutils import nodes

    inline, block = nodes.math(text=r"e^{g_t}"), nodes.math_block(text=r"\sum_{j \le i} x_j", number=None)
    for visit, node in ((mathml.visit_math, inline), (mathml.visit_displaymath, block)):
        with pytest.raises(nodes.SkipNode):
            visit(Writer, node)
    assert Writer.body[0] == f'<span class="math">{convert("e^{g_t}")}</span>'
    assert convert(r"\sum_{j \le i} x_j", display="block") in Writer.body[1]
    assert "<msub>" in Writer.body[0] and 'display="block"' in Writer.body[1]


# ---- the cache: a chapter runs again only when what it reads changed --------------------------------------------

def test_the_key_follows_the_notebook_the_code_and_the_checkpoint(tmp_path, monkeypatch, synthetic):
    code = tmp_path / "code"
    code.mkdir()
    (code / "norm.py").write_text("x = 1\n")
    monkeypatch.setattr(execute, "CODE", [(str(code), "*.py")])
    a, b = notebook_of_cells(tmp_path / "a.ipynb", "print(1)"), notebook_of_cells(tmp_path / "b.ipynb", "print(2)")
    key_a, key_b = execute.key(a, str(synthetic)), execute.key(b, str(synthetic))
    notebook_of_cells(b, "print(3)")  # another chapter edited: a's key stays
    assert execute.key(a, str(synthetic)) == key_a and execute.key(b, str(synthetic)) != key_b
    (code / "norm.py").write_text("x = 2\n")  # the course's code edited: every key moves
    assert execute.key(a, str(synthetic)) != key_a
    assert execute.key(a, "Qwen/Qwen3.5-0.8B") != execute.key(a, str(synthetic))


class Log:
    """A `say` that writes a line a character at a time, letting other threads run between the characters: two lines
    said at once would come out mixed, unless the caller says one line at a time."""

    def __init__(self):
        self.text = []

    def __call__(self, line, **_):
        for char in line + "\n":
            self.text.append(char)
            time.sleep(0.001)

    def lines(self):
        return "".join(self.text).splitlines()


@pytest.mark.slow
def test_a_second_build_runs_only_what_changed(tmp_path, synthetic):
    """Real kernels, both editions' notebooks in one queue of two: the first call runs all three, saying for each
    which edition and notebook starts and how long it took, one whole line each; the second runs none; after one is
    edited, that one."""
    en, zh = (execute.kernel_spec(tmp_path / "kernels" / code, synthetic, code) for code in ("en", "zh"))
    a = notebook_of_cells(tmp_path / "a.ipynb", "print(6 * 7)")
    b = notebook_of_cells(tmp_path / "b.ipynb", "print('b')")
    (tmp_path / "zh").mkdir()
    c = notebook_of_cells(tmp_path / "zh" / "a.ipynb", "from qwen.lang import tr\nprint(tr('en', '中'))")
    editions = {"en": ([a, b], en), "zh": ([c], zh)}
    log = Log()
    ran = execute.executed(editions, str(synthetic), cache=tmp_path / "cache", say=log, jobs=2)
    assert ran["en"]["a"].cells[0].outputs[0].text == "42\n" and ran["zh"]["a"].cells[0].outputs[0].text == "中\n"
    running = [f"[{n}/3] {code} {name}: running on {synthetic} ..." for n, code, name in
               ((1, "en", "a.ipynb"), (2, "en", "b.ipynb"), (3, "zh", "a.ipynb"))]
    assert sorted(line for line in log.lines() if "running" in line) == running, log.lines()
    assert [re.sub(r"\d+ s$", "N s", line) for line in log.lines() if "running" not in line] == \
        ["en a.ipynb: ran in N s", "en b.ipynb: ran in N s", "zh a.ipynb: ran in N s"], log.lines()
    log = Log()
    again = execute.executed(editions, str(synthetic), cache=tmp_path / "cache", say=log)
    assert log.lines() == [] and again["en"]["a"].cells[0].outputs[0].text == "42\n"
    notebook_of_cells(b, "print('edited')")
    execute.executed(editions, str(synthetic), cache=tmp_path / "cache", say=log)
    assert [line for line in log.lines() if "running" in line] == [f"[1/1] en b.ipynb: running on {synthetic} ..."]


@pytest.mark.slow
def test_a_failing_chapter_stops_the_build_naming_it(tmp_path, synthetic):
    kernels = execute.kernel_spec(tmp_path / "kernels", synthetic)
    bad = notebook_of_cells(tmp_path / "ch99_bad.ipynb", "1 / 0")
    with pytest.raises(SystemExit, match=r"en ch99_bad.ipynb stopped with an error(.|\n)*ZeroDivisionError"):
        execute.executed({"en": ([bad], kernels)}, str(synthetic), cache=tmp_path / "cache", say=lambda *a, **k: None)
    assert not (tmp_path / "cache" / "en" / "ch99_bad.ipynb").exists()  # nothing half-run is kept


@pytest.mark.slow
def test_a_cell_that_hangs_is_stopped_at_the_timeout(tmp_path, synthetic, monkeypatch):
    """The per-cell timeout (execute.SECONDS) stops a hung cell: the notebook comes back with the error, at once."""
    monkeypatch.setattr(execute, "SECONDS", 3)
    kernels = execute.kernel_spec(tmp_path / "kernels", synthetic)
    started = time.monotonic()
    nb, error = execute.execute(notebook_of_cells(tmp_path / "hang.ipynb", "import time\ntime.sleep(600)"), kernels)
    assert error is not None and "timed out" in error and "time.sleep(600)" in error, error
    assert time.monotonic() - started < 120


@pytest.mark.slow
def test_python_m_web_help():
    r = subprocess.run([sys.executable, "-m", "web", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and "--serve" in r.stdout and "--model" in r.stdout


# ---- in a real browser ----------------------------------------------------------------------------------------------

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
PHONE = 390  # px: the narrowest phone a page is read on


@pytest.fixture(scope="module")
def browser():
    if not (BROWSER and DRIVER):
        pytest.skip("no Chromium with its chromedriver here (Debian: apt-get install chromium chromium-driver): "
                    "the book is not opened in a browser")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    # headless, and nothing that reaches out: this machine may have no network
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_window_size(PHONE, 844)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def served(site):
    """The site on a local web server (the search reads each found page to show its matching line: a page opened
    from disk may not read another)."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def opened(browser, address):
    """Open a page; the console's errors while it loaded."""
    browser.get(address)
    for _ in range(50):  # every image decoded, or a failure known
        if browser.execute_script("return Array.from(document.images).every(i => i.complete)"):
            break
        time.sleep(0.1)
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


RAW_TEX = re.compile(r"\$[^$\s][^$]*\$|\\(frac|sum|sqrt|odot|cdot|exp|mathrm|operatorname|le|top)\b")
READER = r"""
const article = document.querySelector('article.bd-article');
const prose = article.cloneNode(true);
prose.querySelectorAll('pre, code, math, .math, script, style').forEach(e => e.remove());
const header = document.querySelector('.bd-header-article').getBoundingClientRect().bottom;
return {
  width: document.documentElement.scrollWidth,
  banners: Array.from(document.querySelectorAll('.bd-header-announcement')).map(b => b.textContent.trim()),
  broken: Array.from(document.images).filter(i => !(i.naturalWidth > 0)).map(i => i.src),
  chapters: document.querySelectorAll('.bd-sidebar-primary nav.bd-links li.toctree-l1').length,
  contents: document.querySelectorAll('#pst-page-toc-nav li a').length,
  code: document.querySelectorAll('div.highlight pre').length,
  copy: document.querySelectorAll('div.highlight button.copybtn').length,
  headings: Array.from(article.querySelectorAll('h1, h2, h3')).map(h => h.textContent.replace(/#\s*$/, '').trim()),
  anchors: Array.from(article.querySelectorAll('section[id] > h2')).slice(0, 2).map(h => h.parentElement.id),
  prose: prose.textContent,
  math: article.querySelectorAll('math').length,
  header: header,
};
"""


def formulas(code, page):
    """The formulas ($…$, $$…$$) the source of a page holds: a chapter's markdown cells, an exercise statement."""
    if page.startswith("chapters/"):
        folder = ROOT / "notebooks" / ("zh" if code == "zh" else "")
        nb = nbformat.read(folder / f"{page.split('/')[1].removesuffix('.html')}.ipynb", as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    elif page.startswith("exercises/") and page[10:13].isdigit():
        folder = next(p for p in PROBLEMS if p.name.startswith(page[10:13]))
        text = (folder / README[code]).read_text(encoding="utf-8")
    else:
        return 0
    text = re.sub(r"```.*?```|`[^`\n]*`", "", text, flags=re.S)
    return len(re.findall(r"\$\$.+?\$\$|\$[^$\n]+\$", text, flags=re.S))


@pytest.mark.slow
@pytest.mark.parametrize("code", EDITIONS)
@pytest.mark.parametrize("page", PAGES)
def test_every_page_reads_on_a_phone(browser, site, page, code):
    """Opened at a phone's width from disk (offline): no console error; nothing wider than the screen (wide code
    and tables scroll inside themselves); every image loaded; the one banner; the sidebar with every chapter; on a
    chapter page its contents list; each formula rendered (MathML), none left as TeX; a copy button on every code
    block; Chinese headings short enough to be headings; a heading followed by its link is not under the header."""
    path = site / f"{EDITIONS[code]}{page}"
    assert opened(browser, path.as_uri()) == []
    seen = browser.execute_script(READER)
    assert seen["width"] <= PHONE, f"{page} is {seen['width']} px wide on a {PHONE} px screen"
    assert seen["broken"] == []
    assert len(seen["banners"]) == 1 and SYNTHETIC[code] in seen["banners"][0]
    assert seen["chapters"] == len(SCRIPTS) + 1  # the chapters, then the exercises
    if page.startswith("chapters/"):
        assert seen["contents"] >= 3, "no contents list"
    assert seen["copy"] == seen["code"] > 0 or seen["code"] == 0
    assert not RAW_TEX.search(seen["prose"]), RAW_TEX.search(seen["prose"]).group(0)
    assert seen["math"] >= formulas(code, page)
    if code == "zh":
        assert all(len(h) <= 60 for h in seen["headings"]), [h for h in seen["headings"] if len(h) > 60]
    for anchor in seen["anchors"]:
        browser.get(f"{path.as_uri()}#{anchor}")
        time.sleep(0.2)
        top, header = browser.execute_script(
            "return [document.getElementById(arguments[0]).querySelector('h2').getBoundingClientRect().top, "
            "document.querySelector('.bd-header-article').getBoundingClientRect().bottom]", anchor)
        assert top >= header - 1, f"#{anchor} lies under the header ({top} < {header})"


@pytest.mark.slow
@pytest.mark.parametrize("code", EDITIONS)
@pytest.mark.parametrize("name", SCRIPTS)
def test_chapter_page_shows_what_the_script_prints_and_draws(browser, site, executed, name, code):
    """Every image loaded; the figures the chapter draws (those python chapters/<it>.py --figures saves), each
    numbered, with its title as caption and alt text; and, cell by cell, the lines the script prints (except where
    a page shows a figure, a listing, an exercise or the proof instead of the script's one line: what its notebook's
    run printed, which tests/test_notebooks.py holds to the script). Timings are masked."""
    assert opened(browser, (site / f"{EDITIONS[code]}chapters/{name}.html").as_uri()) == []
    images = browser.execute_script(
        "return Array.from(document.querySelectorAll('article img')).map(i => [i.naturalWidth, i.alt, "
        "i.closest('figure') && i.closest('figure').id, i.closest('figure') && "
        "i.closest('figure').querySelector('figcaption').textContent])")
    assert images and all(width > 0 and alt for width, alt, _, _ in images), images
    assert {figure.removeprefix("fig-") for _, _, figure, _ in images} == set(FIGURES[name])
    number = int(name[2:4])
    assert all(re.match(rf"\s*(Fig\.|图) {number}\.\d+", caption) for _, _, _, caption in images), images
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('div.cell')).map(c => [c.querySelector('.cell_input pre')"
        ".textContent, Array.from(c.querySelectorAll('.cell_output .output:not(.stderr):not(.text_markdown) pre'))"
        ".map(o => o.textContent).join('')])")
    page = "".join(out for code, out in cells if not MODE_DEPENDENT.search(code))
    nb, error = executed(name, code)
    assert error is None, error
    assert masked(page) == masked(shared_stdout(nb))


SEARCHES = [("en", "KV cache", "chapters/ch06_attention.html"), ("en", "DeltaNet", "chapters/ch07_deltanet.html"),
            ("zh", "键值缓存", "chapters/ch06_attention.html"), ("zh", "DeltaNet", "chapters/ch07_deltanet.html"),
            ("zh", "归一化", "chapters/")]


@pytest.mark.slow
@pytest.mark.parametrize("code, query, first", SEARCHES)
def test_search_ranks_the_chapter_that_treats_it_first(browser, served, code, query, first):
    """Typed into the search box of a chapter page: the chapter that treats the words comes first (before the index
    pages that name every chapter's subject), each result shows the line it matched, and the first one opens. A
    Chinese word is found in Chinese pages (segmented by jieba)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    assert opened(browser, f"{served}{EDITIONS[code]}chapters/ch03_norm.html") == []
    next(b for b in browser.find_elements(By.CSS_SELECTOR, "button.search-button, .search-button__button")
         if b.is_displayed()).click()
    field = WebDriverWait(browser, 10).until(
        lambda b: next((f for f in b.find_elements(By.CSS_SELECTOR, "form.bd-search input") if f.is_displayed()), None))
    field.send_keys(query, Keys.ENTER)
    WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#search-results ul.search li")
                                     or b.find_element(By.ID, "search-progress").text.strip())
    results = browser.find_elements(By.CSS_SELECTOR, "#search-results ul.search li")
    assert results, f"the search found nothing for {query}"
    hrefs = [r.find_element(By.TAG_NAME, "a").get_attribute("href") for r in results]
    assert hrefs[0].startswith(f"{served}{EDITIONS[code]}{first}"), hrefs[:5]
    WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#search-results li p.context"))
    context = results[0].find_element(By.CSS_SELECTOR, "p.context").text
    assert any(word.lower() in context.lower() for word in query.split()), context
    results[0].find_element(By.TAG_NAME, "a").click()
    assert browser.current_url.startswith(hrefs[0].split("?")[0].split("#")[0])
