"""The book (web/), in both editions (English at the root, Chinese in zh/): the site is built from the notebooks the
suite already executes (the `executed` fixture, shared with tests/test_notebooks.py), then checked as files (every
page, every link, nothing of the judge's secrets) and opened page by page in headless Chromium (Debian's chromium
and chromium-driver, driven by selenium): no console error, every image loaded, each chapter page printing what its
script prints and drawing its figures, and the search box finding a word. Where no Chromium is installed, the
browser tests are skipped, saying so."""
import json
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
from web import execute, render
from web.build import build_site

SCRIPTS = [p.stem for p in sorted((ROOT / "chapters").glob("ch[0-9][0-9]_*.py"))]

PROBLEMS = sorted(p for p in (ROOT / "practice").glob("[0-9][0-9][0-9]_*") if (p / "README.md").is_file())
EDITIONS = {"en": "", "zh": "zh/"}  # where each edition's pages are, from the site's root
README = {"en": "README.md", "zh": "README.zh.md"}
SYNTHETIC = {"en": "synthetic checkpoint", "zh": "合成检查点"}  # what the banner of each edition says


@pytest.fixture(scope="module")
def site(executed, synthetic, tmp_path_factory):
    editions = {}
    for code in EDITIONS:
        editions[code] = {}
        for name in SCRIPTS:
            nb, error = executed(name, code)
            assert error is None, error
            editions[code][name] = nb
    return build_site(editions, str(synthetic), tmp_path_factory.mktemp("book") / "site").parent


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
    """The index, a page per chapter, the exercises' index and a page per exercise: nothing else."""
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    assert pages == sorted(f"{where}{page}" for where in EDITIONS.values() for page in [
        "index.html", "exercises/index.html", *(f"chapters/{s}.html" for s in SCRIPTS),
        *(f"exercises/{p.name[:3]}.html" for p in PROBLEMS)])
    assert len(SCRIPTS) == 12 and len(PROBLEMS) == 24


@pytest.mark.slow
def test_every_internal_link_resolves(site):
    """Every href and src of every page: a file that exists (a page, a figure, the style sheet, or one of the
    course's files in the checkout), and an anchor that its page has. No address leaves the machine."""
    ids = {}
    for page in site.rglob("*.html"):
        for link in parsed(page).links:
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc, f"{page.name} links outside: {link}"
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.exists(), f"{page.relative_to(site)}: {link} does not resolve"
            if parts.fragment:
                if target not in ids:
                    ids[target] = parsed(target).ids
                assert parts.fragment in ids[target], f"{page.relative_to(site)}: no #{parts.fragment} in {link}"


@pytest.mark.slow
def test_chapter_pages_link_their_script_notebook_modules_and_exercises(site):
    page = site / "chapters" / "ch03_norm.html"
    ch03 = page.read_text(encoding="utf-8")
    linked = {(page.parent / link).resolve() for link in parsed(page).links}
    for source in ("chapters/ch03_norm.py", "notebooks/ch03_norm.ipynb", "qwen/norm.py", "book/ch03.py"):
        assert ROOT / source in linked, source
    # "exercise 204" and "205" in the prose link to their pages, in code they stay code
    assert re.search(r'exercise <a href="../exercises/204.html">204</a>', ch03)
    assert re.search(r'<a href="../exercises/205.html">205</a>', ch03)
    assert "practice/judge.py start 204" in ch03
    # the language switch: the same page in the other edition, and back
    assert (page.parent / "../zh/chapters/ch03_norm.html").resolve() in linked
    zh = site / "zh" / "chapters" / "ch03_norm.html"
    assert page.resolve() in {(zh.parent / link).resolve() for link in parsed(zh).links}


@pytest.mark.slow
@pytest.mark.parametrize("code", EDITIONS)
def test_exercise_pages_show_the_statement_and_keep_the_judge_secret(site, code):
    """Each exercise page: its statement (in the edition's language), the signatures and the worked example, and
    the commands that grade it; none of its hidden cases' description and none of its hints (they would spoil the
    judge)."""
    for folder in PROBLEMS:
        number = folder.name[:3]
        page = (site / f"{EDITIONS[code]}exercises/{number}.html").read_text(encoding="utf-8")
        readme = (folder / README[code]).read_text(encoding="utf-8")
        signature = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
        text = render.plain_text(page)
        squeezed = re.sub(r"\s", "", text)  # highlighted code: a span per token
        for line in signature.splitlines():
            assert re.sub(r"\s", "", line) in squeezed, (number, line)
        assert re.sub(r"\s", "", render.plain_text(readme.splitlines()[0].lstrip("# "))) in squeezed, number
        assert f"python practice/judge.py start {number}" in page and f"python practice/judge.py {number}" in page
        grading = re.split(r"^## (?:Grading|评测|评分)", readme, flags=re.M)
        for sentence in re.findall(r"[^.。\n]{20,}", grading[1] if len(grading) > 1 else "")[:5]:
            assert re.sub(r"\s", "", render.plain_text(sentence)) not in squeezed, (number, sentence)
        mistakes = folder / "mistakes.toml"
        if mistakes.is_file():
            for entry in tomllib.loads(mistakes.read_text(encoding="utf-8")).values():
                if isinstance(entry, dict) and entry.get(code):
                    assert entry[code][:40] not in text, (number, entry[code])


@pytest.mark.slow
@pytest.mark.parametrize("code", EDITIONS)
def test_the_search_index_holds_every_section(site, code):
    text = (site / f"{EDITIONS[code]}search-index.js").read_text(encoding="utf-8")
    records = json.loads(text.removeprefix("window.SEARCH_INDEX = ").rstrip().removesuffix(";"))
    deltanet = [r for r in records if "DeltaNet" in r["heading"] + r["text"]]
    assert any(r["href"].startswith("chapters/ch07_deltanet.html#") for r in deltanet)
    assert {r["href"].split("#")[0] for r in records} >= {f"chapters/{s}.html" for s in SCRIPTS}


def test_markdown_links_exercises_outside_code_only():
    html = render.markdown("exercise 204 asks; `exercise 204` stays; **Exercises**: 210 · a; 211 · b; 999 · c",
                           {204: "e/204.html", 210: "e/210.html", 211: "e/211.html"})
    assert html.count('href="e/204.html"') == 1 and "<code>exercise 204</code>" in html
    assert 'href="e/210.html"' in html and 'href="e/211.html"' in html and "999" in html and "e/999" not in html


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
                 "--window-size=1280,1800"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


def opened(browser, path):
    """Open a page from disk; the console's errors while it loaded."""
    browser.get(path.as_uri())
    for _ in range(50):  # every image decoded, or a failure known
        if browser.execute_script("return Array.from(document.images).every(i => i.complete)"):
            break
        time.sleep(0.1)
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.parametrize("code", EDITIONS)
@pytest.mark.slow
@pytest.mark.parametrize("page", ["index.html", "exercises/index.html", *(f"exercises/{p.name[:3]}.html"
                                                                          for p in PROBLEMS)])
def test_page_opens_clean(browser, site, page, code):
    assert opened(browser, site / f"{EDITIONS[code]}{page}") == []
    broken = browser.execute_script("return Array.from(document.images).filter(i => !(i.naturalWidth > 0))"
                                    ".map(i => i.src)")
    assert broken == []
    assert SYNTHETIC[code] in browser.find_element("css selector", ".banner").text


@pytest.mark.slow
@pytest.mark.parametrize("code", EDITIONS)
@pytest.mark.parametrize("name", SCRIPTS)
def test_chapter_page_shows_what_the_script_prints_and_draws(browser, site, executed, name, code):
    """No console error; every image loaded; the figures the chapter draws (those python chapters/<it>.py --figures
    saves), each with its title as alt text; and, cell by cell, the lines the script prints (except where a page
    shows a figure, a listing, an exercise or the proof instead of the script's one line: what its notebook's run
    printed, which tests/test_notebooks.py holds to the script). Timings are masked."""
    assert opened(browser, site / f"{EDITIONS[code]}chapters/{name}.html") == []
    images = browser.execute_script("return Array.from(document.images).map(i => [i.naturalWidth, i.alt, "
                                    "i.closest('figure') && i.closest('figure').id])")
    assert images and all(width > 0 and alt for width, alt, _ in images), images
    assert {figure.removeprefix("fig-") for _, _, figure in images} == set(FIGURES[name])
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('.cell')).map(c => [c.querySelector('pre.code').textContent, "
        "Array.from(c.querySelectorAll('pre.output:not(.stderr)')).map(o => o.textContent).join('')])")
    page = "".join(out for code, out in cells if not MODE_DEPENDENT.search(code))
    nb, error = executed(name, code)
    assert error is None, error
    assert masked(page) == masked(shared_stdout(nb))
    assert SYNTHETIC[code] in browser.find_element("css selector", ".banner").text


@pytest.mark.slow
def test_a_line_the_kernel_sent_in_two_chunks_reads_back_whole(browser, tmp_path):
    """The kernel flushes stdout on a timer, so print("a") can arrive as "a" and then "\\n"; and the HTML parser
    drops a newline that opens a <pre>. The page must still show the two lines as two lines, as the script did."""
    cell = nbformat.v4.new_code_cell("print('a'); print('b'); print('c')", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="a"),
        nbformat.v4.new_output("stream", name="stdout", text="\nb\n"),
        nbformat.v4.new_output("stream", name="stderr", text="note\n"),
        nbformat.v4.new_output("stream", name="stdout", text="\nc\n")])
    page = tmp_path / "cell.html"
    page.write_text(f"<!doctype html><meta charset=utf-8><div>{render.outputs(cell, None)}</div>", encoding="utf-8")
    assert opened(browser, page) == []
    shown = browser.execute_script("return Array.from(document.querySelectorAll('pre.output:not(.stderr)'))"
                                   ".map(o => o.textContent)")
    assert shown == ["a\nb\n", "\nc\n"]


@pytest.mark.slow
@pytest.mark.parametrize("code", EDITIONS)
def test_search_finds_deltanet(browser, site, code):
    """Typed into the box of a chapter page (its links are relative to a folder below the root), the word lists
    sections that hold it, and the first one opens."""
    from selenium.webdriver.common.by import By

    assert opened(browser, site / f"{EDITIONS[code]}chapters/ch03_norm.html") == []
    browser.find_element(By.ID, "search").send_keys("DeltaNet")
    results = browser.find_elements(By.CSS_SELECTOR, "#search-results li a")
    assert results, "the search found nothing for DeltaNet"
    first = results[0].get_attribute("href")
    results[0].click()
    assert browser.current_url == first and "DeltaNet" in browser.find_element(By.TAG_NAME, "main").text
