"""The book's pages and how they link: a page per chapter (from its executed notebook), a page per exercise (its
statement, without the judge's hidden cases or hints), the index with the course map, and the search index.

Every address is relative, so the same files work served (bash course.sh book --serve, GitHub Pages) and opened
from disk. Links to the course's files (a chapter's script, notebook and modules) point into the checkout, or to
`source_url` + the file's path when one is given (the published site links to the repository).
"""
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from qwen.lang import language, tr, unwrap
from web import render

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
TEMPLATE = Environment(loader=FileSystemLoader(HERE), autoescape=True).get_template("page.html")
LISTING = re.compile(r'book\.listing\("([^"]+)"')  # the modules a chapter shows
HIDDEN = re.compile(r"^## (Grading|评测|评分)\b.*", re.S | re.M)  # hidden cases and hints: the judge's, not the page's
OTHER_LANGUAGE = re.compile(r"\s*—\s*\[(中文|English)\]\(README(\.zh)?\.md\)")


@dataclass
class Page:
    href: str  # from the site's root: chapters/ch03_norm.html
    title: str
    body: str
    sources: list = field(default_factory=list)  # [(label, path in the checkout)]
    summary: str = ""
    thumbnail: str = ""  # a figure's address from the site's root

    @property
    def root(self):
        return "../" * self.href.count("/")


def _figures(site, folder):
    """A function that writes a page's figure to site/folder/<name>.png and returns its address from the page."""
    def write(name, png):
        path = site / folder / "figures" / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        return f"figures/{name}.png"
    return write


def _first_paragraph(nb):
    """What a chapter adds, in its own words: the paragraph after its title."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("# "):
            paragraphs = [p for p in cell.source.split("\n\n")[1:] if p.strip()]
            return paragraphs[0].strip() if paragraphs else ""
    return ""


def _figure_names(nb):
    return [o.metadata["book"]["figure"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if "figure" in o.get("metadata", {}).get("book", {})]


def chapter_pages(notebooks, site, exercises):
    """{stem: executed notebook} -> a Page each, in the order given. `exercises`: {number: Page}."""
    pages = []
    for stem, nb in notebooks.items():
        links = {n: f"../{p.href}" for n, p in exercises.items()}
        body = render.body(nb, _figures(site, "chapters"), links)
        script = ROOT / "chapters" / f"{stem}.py"
        modules = LISTING.findall(script.read_text(encoding="utf-8")) if script.is_file() else []
        figures_module = f"book/{stem.split('_')[0]}.py"
        notebook = f"notebooks/{'zh/' if language() == 'zh' else ''}{stem}.ipynb"
        sources = [(tr("script", "脚本"), f"chapters/{stem}.py"), (tr("notebook", "笔记本"), notebook)]
        sources += [(m, m) for m in modules]
        if (ROOT / figures_module).is_file():
            sources.append((figures_module + tr(" (its figures)", "（本章的图）"), figures_module))
        thumbs = [f for f in _figure_names(nb) if not f.endswith("-map")]
        thumbnail = f"chapters/figures/{thumbs[0]}.png" if thumbs else ""
        pages.append(Page(f"chapters/{stem}.html", render.title(nb), body, sources, _first_paragraph(nb), thumbnail))
    return pages


def exercise_pages(chapter_of):
    """A page per practice problem: its statement, signature and worked example, and how to grade it locally.
    `chapter_of`: {chapter number: chapter page's href}."""
    pages = {}
    for folder in sorted((ROOT / "practice").glob("[0-9][0-9][0-9]_*")):
        readme = folder / ("README.zh.md" if language() == "zh" else "README.md")
        meta = folder / "meta.json"
        if not readme.is_file() or not meta.is_file():
            continue
        number, meta = int(folder.name[:3]), json.loads(meta.read_text(encoding="utf-8"))
        statement = OTHER_LANGUAGE.sub("", HIDDEN.sub("", readme.read_text(encoding="utf-8"))).rstrip()
        chapter = chapter_of.get(meta["chapter"])
        back = tr(f"\n\nIt belongs to [chapter {meta['chapter']}](../{chapter}).",
                  f"\n\n它属于[第 {meta['chapter']} 章](../{chapter})。") if chapter else ""
        grade = tr(f"\n\n## Grade it on your machine\n\n```\npython practice/judge.py start {number}   # copies the "
                   f"starter to practice/work/{folder.name}.py\npython practice/judge.py {number}         # grades it: "
                   f"the examples above and hidden cases\n```\n\nOr write it in the chapter's notebook, in the cell "
                   f"that ends with `book.attempt({number}, ...)`, and run that cell.{back}",
                   f"\n\n## 在你的机器上评测\n\n```\npython practice/judge.py start {number}   # 把起始代码复制到 "
                   f"practice/work/{folder.name}.py\npython practice/judge.py {number}         # 评测：上面的样例和"
                   f"隐藏用例\n```\n\n也可以在本章的笔记本里写：找到以 `book.attempt({number}, ...)` 结尾的那个单元格，"
                   f"运行它。{back}")
        body = render.markdown(unwrap(statement + grade))
        pages[number] = Page(f"exercises/{number}.html", f"{number} · {meta['title'][language()]}", body,
                             [(tr("statement", "题面"), f"practice/{folder.name}/{readme.name}"),
                              (tr("starter", "起始代码"), f"practice/{folder.name}/starter.py")])
    return pages


def index_page(chapters, exercises, intro):
    cards = []
    for page in chapters:
        alt = tr("a figure of this chapter", "本章的一张图")
        thumb = f'<img src="{page.thumbnail}" alt="{alt}">' if page.thumbnail else ""
        cards.append(f'<li><a href="{page.href}">{thumb}<h3>{Markup.escape(page.title)}</h3></a>'
                     f'{render.MARKDOWN.renderInline(page.summary)}</li>')
    listed = "\n".join(f'<li><a href="{p.href}">{Markup.escape(p.title)}</a></li>' for p in exercises.values())
    graded = tr("Each is graded on your machine by the course’s judge.",
                "每道练习都由课程的评测器在你的机器上评测。")
    body = (f'{render.markdown(intro)}<h2 id="chapters">{tr("Chapters", "章节")}</h2><ol class="chapters">'
            f'{"".join(cards)}</ol><h2 id="exercises">{tr("Exercises", "练习")}</h2><p>{graded}</p><ul>{listed}</ul>')
    return Page("index.html", tr("Qwen3.5 by Hand", "手写 Qwen3.5"), body)


def exercises_index(exercises):
    rows = "\n".join(f'<li><a href="{p.href.removeprefix("exercises/")}">{Markup.escape(p.title)}</a></li>'
                     for p in exercises.values())
    body = tr(f'<h1 id="exercises">Exercises</h1><p>Try each where its chapter names it, before reading the finished '
              f'code. <code>python practice/judge.py list</code> shows your progress.</p><ul>{rows}</ul>',
              f'<h1 id="exercises">练习</h1><p>在章节提到它的地方先自己做，再读写好的代码。'
              f'<code>python practice/judge.py list</code> 显示你的进度。</p><ul>{rows}</ul>')
    return Page("exercises/index.html", tr("Exercises", "练习"), body)


OTHER_EDITION = {"en": {"lang": "zh-CN", "label": "中文"}, "zh": {"lang": "en", "label": "English"}}  # the switch
UI = {  # the words of the page around its body
    "en": {"home": "Qwen3.5 by Hand", "chapters": "Chapters", "exercises": "Exercises", "search": "Search the course",
           "nothing": "Nothing found for"},
    "zh": {"home": "手写 Qwen3.5", "chapters": "章节", "exercises": "练习", "search": "搜索课程",
           "nothing": "没有找到"},
}
SECTION = re.compile(r'<h([1-3]) id="([^"]+)">(.*?)</h\1>', re.S)


def search_index(pages):
    """One record per section (a heading and what follows it) of every page: what the search box looks through."""
    records = []
    for page in pages:
        found = list(SECTION.finditer(page.body))
        starts = [(0, "", "")] + [(m.start(), m.group(2), render.plain_text(m.group(3)).rstrip(" #")) for m in found]
        for (start, anchor, heading), end in zip(starts, [m.start() for m in found] + [len(page.body)]):
            text = render.plain_text(page.body[start:end])
            if text:
                records.append({"page": page.title, "heading": heading, "text": text,
                                "href": page.href + (f"#{anchor}" if anchor else "")})
    return records


def _neighbours(pages):
    """{href: (previous, next)}: chapters in a row, exercises in a row (the index pages stand alone)."""
    rows = {}
    for page in pages:
        if page.href.count("/") and not page.href.endswith("index.html"):
            rows.setdefault(page.href.split("/")[0], []).append(page)
    return {row[i].href: (row[i - 1] if i else None, row[i + 1] if i + 1 < len(row) else None)
            for row in rows.values() for i in range(len(row))}


def write(site, pages, banner, footer, source_url=None, other=None):
    """Every page as HTML under `site`, with its neighbours as previous and next, and a link to the same page in
    the other edition when `other` (its site folder) is given."""
    around = _neighbours(pages)
    for page in pages:
        folder = (site / page.href).parent
        previous, after = (other and {"href": os.path.relpath(site / other.href, folder), "title": other.title}
                           for other in around.get(page.href, (None, None)))
        sources = [(label, source_url + path if source_url else os.path.relpath(ROOT / path, folder))
                   for label, path in page.sources]
        switch = other and {"href": os.path.relpath(other / page.href, folder), **OTHER_EDITION[language()]}
        html = TEMPLATE.render(lang=tr("en", "zh-CN"), title=page.title, root=page.root, banner=banner,
                               sources=sources, body=Markup(page.body), previous=previous, next=after, footer=footer,
                               switch=switch, ui=UI[language()])
        folder.mkdir(parents=True, exist_ok=True)
        (site / page.href).write_text(html, encoding="utf-8")
