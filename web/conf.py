"""The engine's settings for one edition of the book: Sphinx with MyST-NB (the chapters are executed notebooks,
rendered and never run again), sphinx-book-theme (sidebar, contents, dark mode, phones, print) and
sphinx-copybutton. web/source.py copies this file into the edition's folder beside edition.json, which holds what
one build adds: the language, the banner, the repository, and each page's files.
"""
import json
import logging
import os
import sys
from pathlib import Path

import jieba
from docutils import nodes
from sphinx.search.zh import SearchChinese

BOOK = json.loads((Path(__file__).parent / "edition.json").read_text(encoding="utf-8"))
ROOT, WEB = Path(BOOK["root"]), Path(BOOK["root"]) / "web"
sys.path.insert(0, str(ROOT))  # web.mathml below
ZH = BOOK["language"] == "zh"
jieba.setLogLevel(logging.WARNING)  # it reports loading its dictionary on every build

project = "手写 Qwen3.5" if ZH else "Qwen3.5 by Hand"
author = "Qwen3.5 by Hand"
language = "zh_CN" if ZH else "en"
extensions = ["myst_nb", "sphinx_copybutton", "web.mathml"]
exclude_patterns = ["_build", "edition.json"]

# the notebooks come executed by web/execute.py (its cache, its en/zh runs): never run here
nb_execution_mode = "off"
nb_merge_streams = False  # web/source.py joins a line sent in two chunks, keeping the outputs' order and text
nb_render_markdown_format = "myst"  # a listing is a markdown output holding a code block
myst_enable_extensions = ["dollarmath", "amsmath"]  # $…$ and $$…$$ in the chapters' prose
myst_heading_anchors = 3
numfig = True  # "Fig. 3.2": the figures are numbered by chapter (the chapters' table of contents is numbered)
numfig_secnum_depth = 1
html_math_renderer = "mathml"  # web/mathml.py: formulas become MathML at build time, readable with no network
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]

html_theme = "sphinx_book_theme"
html_title = project
html_favicon = str(WEB / "static" / "favicon.svg")
html_static_path = [str(WEB / "static")]
html_css_files = ["book.css"]
html_js_files = ["book.js"]
templates_path = [str(WEB / "templates")]
html_sourcelink_suffix = ""  # the download button hands out the executed notebook as it is (.ipynb)
html_last_updated_fmt = None
html_search_language = "zh" if ZH else "en"  # Chinese is segmented with jieba, in the index and in the query
html_search_scorer = str(WEB / "static" / "scorer.js")
html_context = {"default_mode": "auto", "book_other": BOOK["other"]}  # dark mode follows the system
html_theme_options = {
    "announcement": BOOK.get("banner") or "",
    "home_page_in_toc": False,  # the book's title above the list is the link to it
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": bool(BOOK.get("repository")),
    "repository_url": BOOK.get("repository") or "",
    "repository_branch": BOOK.get("commit") or "main",
    "navbar_persistent": [],  # no second search box in a header above the page's own
    "article_header_end": ["edition.html", "article-header-buttons.html"],
    "secondary_sidebar_items": ["page-toc.html", "sources.html"],
    "extra_footer": BOOK.get("footer", ""),
}
copybutton_exclude = ".linenos, .gp, .go"  # line numbers, prompts and printed output are not copied


def page_buttons(app, pagename, templatename, context, doctree):
    """Buttons of a page beside the theme's own, on the repository: the file to edit (a chapter's script, its one
    source) and the notebook to open in Colab."""
    repository, commit, branch = BOOK.get("repository"), BOOK.get("commit") or "main", BOOK.get("branch") or "main"
    buttons = context.setdefault("header_buttons", [])
    edit, colab = BOOK["edit"].get(pagename), BOOK["colab"].get(pagename)
    if repository and colab:
        org_repo = repository.rstrip("/").split("github.com/")[-1]
        buttons.insert(0, {"type": "link", "url": f"https://colab.research.google.com/github/{org_repo}/blob/{commit}/"
                           f"{colab}", "tooltip": "在 Colab 中打开" if ZH else "Open in Colab",
                           "icon": "_static/images/logo_colab.png", "label": "colab-button"})
    if repository and edit:
        buttons.insert(0, {"type": "link", "url": f"{repository.rstrip('/')}/edit/{branch}/{edit}",
                           "tooltip": "编辑此页的源文件" if ZH else "Edit this page's source",
                           "icon": "fas fa-pencil-alt", "label": "edit-button"})


def page_sources(app, pagename, templatename, context, doctree):
    """The files a page is made from, for its side bar (sources.html): on the repository, or in the checkout."""
    repository, commit = BOOK.get("repository"), BOOK.get("commit") or "main"
    site_page = Path(BOOK["site"]) / pagename  # where the page will lie, for an address into the checkout
    context["book_sources"] = [
        (label, f"{repository.rstrip('/')}/blob/{commit}/{path}" if repository
         else Path(os.path.relpath(ROOT / path, site_page.parent)).as_posix())
        for label, path in BOOK["sources"].get(pagename, [])]


def chapter_numbers_for_figures_only(app, env):
    """The chapters' table of contents is numbered so that a figure is numbered within its chapter ("Fig. 3.2");
    a chapter's title already says its number ("Chapter 3 · ..."), so once the figures have theirs, the section
    numbers are dropped (the headings' and those the contents' entries carry) and no title or sidebar entry shows
    "3. Chapter 3"."""
    env.toc_secnumbers = {}
    for toc in env.tocs.values():
        for entry in toc.findall(nodes.reference):
            entry.attributes.pop("secnumber", None)


class ChineseSearch(SearchChinese):
    """Sphinx 9.0's Chinese search: its index of Chinese words (jieba) as it is, with the stemmer it ships for the
    Latin words in it (the English one) named as such: it names a ChineseStemmer it never ships, which stops every
    page's scripts with an error."""
    language_name = "English"


def setup(app):
    app.connect("html-page-context", page_sources, priority=400)  # before the theme drops side bar parts that are empty
    app.connect("html-page-context", page_buttons, priority=502)  # after the theme has made its buttons
    app.add_search_language(ChineseSearch)
    app.connect("env-check-consistency", chapter_numbers_for_figures_only)  # after the numbering
