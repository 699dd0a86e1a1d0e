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

from web import render

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
TEMPLATE = Environment(loader=FileSystemLoader(HERE), autoescape=True).get_template("page.html")
LISTING = re.compile(r'book\.listing\("([^"]+)"')  # the modules a chapter shows
HIDDEN = re.compile(r"^## Grading\b.*", re.S | re.M)  # hidden cases and the hints: the judge's, not the page's
OTHER_LANGUAGE = re.compile(r"\s*—\s*\[中文\]\(README\.zh\.md\)")


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
        sources = [("script", f"chapters/{stem}.py"), ("notebook", f"notebooks/{stem}.ipynb")]
        sources += [(m, m) for m in modules]
        if (ROOT / figures_module).is_file():
            sources.append((f"{figures_module} (its figures)", figures_module))
        thumbs = [f for f in _figure_names(nb) if not f.endswith("-map")]
        thumbnail = f"chapters/figures/{thumbs[0]}.png" if thumbs else ""
        pages.append(Page(f"chapters/{stem}.html", render.title(nb), body, sources, _first_paragraph(nb), thumbnail))
    return pages


def exercise_pages(chapter_of):
    """A page per practice problem: its statement, signature and worked example, and how to grade it locally.
    `chapter_of`: {chapter number: chapter page's href}."""
    pages = {}
    for folder in sorted((ROOT / "practice").glob("[0-9][0-9][0-9]_*")):
        readme, meta = folder / "README.md", folder / "meta.json"
        if not readme.is_file() or not meta.is_file():
            continue
        number, meta = int(folder.name[:3]), json.loads(meta.read_text(encoding="utf-8"))
        statement = OTHER_LANGUAGE.sub("", HIDDEN.sub("", readme.read_text(encoding="utf-8"))).rstrip()
        chapter = chapter_of.get(meta["chapter"])
        back = f"\n\nIt belongs to [chapter {meta['chapter']}](../{chapter})." if chapter else ""
        grade = (f"\n\n## Grade it on your machine\n\n```\npython practice/judge.py start {number}   # copies the "
                 f"starter to practice/work/{folder.name}.py\npython practice/judge.py {number}         # grades it: "
                 f"the examples above and hidden cases\n```\n\nOr write it in the chapter's notebook, in the cell that "
                 f"ends with `book.attempt({number}, ...)`, and run that cell.{back}")
        body = render.markdown(statement + grade)
        pages[number] = Page(f"exercises/{number}.html", f"{number} · {meta['title']['en']}", body,
                             [("statement", f"practice/{folder.name}/README.md"),
                              ("starter", f"practice/{folder.name}/starter.py")])
    return pages


def index_page(chapters, exercises, intro):
    cards = []
    for page in chapters:
        thumb = f'<img src="{page.thumbnail}" alt="a figure of this chapter">' if page.thumbnail else ""
        cards.append(f'<li><a href="{page.href}">{thumb}<h3>{Markup.escape(page.title)}</h3></a>'
                     f'{render.MARKDOWN.renderInline(page.summary)}</li>')
    listed = "\n".join(f'<li><a href="{p.href}">{Markup.escape(p.title)}</a></li>' for p in exercises.values())
    body = (f'{render.markdown(intro)}<h2 id="chapters">Chapters</h2><ol class="chapters">{"".join(cards)}</ol>'
            f'<h2 id="exercises">Exercises</h2><p>Each is graded on your machine by the course\'s judge.</p>'
            f'<ul>{listed}</ul>')
    return Page("index.html", "Qwen3.5 by Hand", body)


def exercises_index(exercises):
    rows = "\n".join(f'<li><a href="{p.href.removeprefix("exercises/")}">{Markup.escape(p.title)}</a></li>'
                     for p in exercises.values())
    body = (f'<h1 id="exercises">Exercises</h1><p>Try each where its chapter names it, before reading the finished '
            f'code. <code>python practice/judge.py list</code> shows your progress.</p><ul>{rows}</ul>')
    return Page("exercises/index.html", "Exercises", body)


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


def write(site, pages, banner, footer, source_url=None):
    """Every page as HTML under `site`, with its neighbours as previous and next."""
    around = _neighbours(pages)
    for page in pages:
        folder = (site / page.href).parent
        previous, after = (other and {"href": os.path.relpath(site / other.href, folder), "title": other.title}
                           for other in around.get(page.href, (None, None)))
        sources = [(label, source_url + path if source_url else os.path.relpath(ROOT / path, folder))
                   for label, path in page.sources]
        html = TEMPLATE.render(lang="en", title=page.title, root=page.root, banner=banner, sources=sources,
                               body=Markup(page.body), previous=previous, next=after, footer=footer)
        folder.mkdir(parents=True, exist_ok=True)
        (site / page.href).write_text(html, encoding="utf-8")
