"""One edition of the book as a Sphinx project: the pages' sources the engine (Sphinx, MyST-NB, sphinx-book-theme)
turns into the site, written into a folder of their own (data/book/sphinx/<lang>/ for python -m web):

    index.md            what the course is, the chapters with what each adds, and the table of contents
    the chapters        each chapter's notebook as our own run left it (web/execute.py), in a folder `chapters`:
                        MyST-NB renders it and never runs it; the reader downloads this very file
    the exercises       each practice problem's statement, without the judge's hidden cases or hints, and their
                        index, in a folder `exercises`
    conf.py             the engine's settings (a copy of web/conf.py), and edition.json beside it: what this build
                        adds to them

Three things are done to a chapter's notebook on its way in, none of which changes what a run printed: a line the
kernel sent in two pieces is joined again; a figure (book.show) gets its title as caption and alt text and its
name as anchor (#fig-ch03-rms); and a listing (book.listing) becomes a Python code block (C++ for a .cpp file).
Where the prose names an exercise ("exercise 204", "204 · ..."), the number links to its page. A file is written
only when its bytes change, so the engine rebuilds only those pages.
"""
import copy
import json
import re
from pathlib import Path

import nbformat

from qwen.lang import language, tr, unwrap

ROOT = Path(__file__).resolve().parent.parent
WEB = Path(__file__).resolve().parent
LISTING = re.compile(r'book\.listing\("([^"]+)"')  # the modules a chapter shows
HIDDEN = re.compile(r"^## (Grading|评测|评分)\b.*", re.S | re.M)  # hidden cases and hints: the judge's, not the page's
OTHER_LANGUAGE = re.compile(r"\s*—\s*\[(中文|English)\]\(README(\.zh)?\.md\)")
CODE_SPAN = re.compile(r"(```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]+\$)", re.S)  # code and math are never linked
MARKUP = re.compile(r"([\\`*_\[\]<>$])")  # what markdown would read as markup in a figure's title


def link_exercises(markdown, exercises):
    """The markdown with each named exercise that exists (a number in `exercises`: {number: link}) made a link,
    outside code spans, code blocks and formulas."""
    def link(match):
        number = int(match.group(2))
        return match.group(0) if number not in exercises else f"{match.group(1)}[{number}]({exercises[number]})"

    def link_all(text):  # "exercise 204", then the numbers that follow in a list ("210 · ..., 211 · ...")
        text = re.sub(r"\b([Ee]xercises?\**:? )(2\d\d)\b", link, text)
        return re.sub(r"(^|; |, |\n)(2\d\d)(?= · )", link, text)

    pieces = CODE_SPAN.split(markdown)
    return "".join(p if i % 2 else link_all(p) for i, p in enumerate(pieces))


def joined_streams(outputs):
    """The outputs with each run of same-named stream chunks joined into one, the text exactly as sent: the kernel
    flushes stdout on a timer, so one printed line can arrive in two chunks (its text, then its newline). (MyST-NB's
    own merge strips each chunk's end and gathers a stream's chunks from across the figures between them.)"""
    joined = []
    for output in outputs:
        previous = joined[-1] if joined else None
        if (output.output_type == "stream" and previous is not None and previous.output_type == "stream"
                and previous.name == output.name):
            previous.text += output.text
        else:
            joined.append(output)
    return joined


def chapter_notebook(nb, exercises):
    """A copy of an executed chapter notebook as the engine should show it (see the module's docstring)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = link_exercises(cell.source, exercises)
            continue
        cell.outputs = joined_streams(cell.get("outputs", []))
        for output in cell.outputs:
            book = output.get("metadata", {}).get("book", {})
            if "figure" in book:  # one figure a cell (book.show): MyST-NB captions and numbers it
                title = (book.get("title") or book["figure"]).replace("\n", " · ")
                cell.metadata["mystnb"] = {"figure": {"caption": MARKUP.sub(r"\\\1", title),
                                                      "name": f"fig-{book['figure']}"},
                                           "image": {"alt": title}}
            elif "listing" in book:
                names = ", ".join(book.get("names", []))
                head = f"{book['listing']}{f' ({names})' if names else ''}"
                lang = "cpp" if book["listing"].endswith(".cpp") else "python"  # chapter 13 shows C++ from its file
                output["data"] = {"text/markdown": f"**{head}**\n\n````{lang}\n{output['data']['text/plain']}\n````\n"}
    return nb


def _first_paragraph(nb):
    """What a chapter adds, in its own words: the paragraph after its title."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("# "):
            paragraphs = [p for p in cell.source.split("\n\n")[1:] if p.strip()]
            return paragraphs[0].strip() if paragraphs else ""
    return ""


def title(nb):
    """The text of the notebook's first heading."""
    for cell in nb.cells:
        found = re.search(r"^#\s+(.+)$", cell.source, re.M) if cell.cell_type == "markdown" else None
        if found:
            return found.group(1).strip()
    return "untitled"


def exercises():
    """{number: (folder, title, statement as markdown)} for every practice problem, in the language spoken now."""
    found = {}
    for folder in sorted((ROOT / "practice").glob("[0-9][0-9][0-9]_*")):
        readme = folder / ("README.zh.md" if language() == "zh" else "README.md")
        meta = folder / "meta.json"
        if readme.is_file() and meta.is_file():
            meta = json.loads(meta.read_text(encoding="utf-8"))
            statement = OTHER_LANGUAGE.sub("", HIDDEN.sub("", readme.read_text(encoding="utf-8"))).rstrip()
            found[int(folder.name[:3])] = (folder, meta, unwrap(statement))
    return found


def exercise_page(number, folder, meta, statement, chapter):
    """An exercise's page: its statement, and how to grade it on your machine. `chapter`: its chapter's page."""
    back = tr(f"\n\nIt belongs to [chapter {meta['chapter']}](../{chapter}).",
              f"\n\n它属于[第 {meta['chapter']} 章](../{chapter})。") if chapter else ""
    grade = tr(f"\n\n## Grade it on your machine\n\n```bash\npython practice/judge.py start {number}   # copies the "
               f"starter to practice/work/{folder.name}.py\npython practice/judge.py {number}         # grades it: "
               f"the examples above and hidden cases\n```\n\nOr write it in the chapter's notebook, in the cell "
               f"that ends with `book.attempt({number}, ...)`, and run that cell.{back}",
               f"\n\n## 在你的机器上评测\n\n```bash\npython practice/judge.py start {number}   # 把起始代码复制到 "
               f"practice/work/{folder.name}.py\npython practice/judge.py {number}         # 评测：上面的样例和"
               f"隐藏用例\n```\n\n也可以在本章的笔记本里写：找到以 `book.attempt({number}, ...)` 结尾的那个单元格，"
               f"运行它。{back}")
    body = re.sub(r"^# .*$", f"# {number} · {meta['title'][language()]}", statement, count=1, flags=re.M)
    return body + grade + "\n"


def index_page(intro, chapters):
    """The book's first page: `intro` (markdown), then each chapter ({stem: notebook}) with what it adds, and the
    table of contents the sidebar and next/previous follow: the chapters in order, then the exercises."""
    listed = "\n".join(f"- **[{title(nb)}](chapters/{stem}.ipynb)** {_first_paragraph(nb)}"
                       for stem, nb in chapters.items())
    toc = "\n".join(f"chapters/{stem}" for stem in chapters)
    graded = tr("Each exercise is graded on your machine by the course’s judge: [the exercises](exercises/index.md).",
                "每道练习都由课程的评测器在你的机器上评测：[练习](exercises/index.md)。")
    return (f"{intro}\n\n## {tr('Chapters', '章节')}\n\n{listed}\n\n## {tr('Exercises', '练习')}\n\n{graded}\n\n"
            f"```{{toctree}}\n:hidden:\n:numbered: 1\n:caption: {tr('Chapters', '章节')}\n\n{toc}\n```\n\n"
            f"```{{toctree}}\n:hidden:\n:caption: {tr('Exercises', '练习')}\n\nexercises/index\n```\n")


def exercises_index(found):
    rows = "\n".join(f"- [{n} · {meta['title'][language()]}]({n}.md)" for n, (_, meta, _) in found.items())
    toc = "\n".join(str(n) for n in found)
    return tr(f"# Exercises\n\nTry each where its chapter names it, before reading the finished code. "
              f"`python practice/judge.py list` shows your progress.\n\n{rows}\n",
              f"# 练习\n\n在章节提到它的地方先自己做，再读写好的代码。`python practice/judge.py list` 显示你的进度。"
              f"\n\n{rows}\n") + f"\n```{{toctree}}\n:hidden:\n\n{toc}\n```\n"


def sources(stem):
    """[(label, path in the checkout)]: the files a chapter page is made from."""
    script = ROOT / "chapters" / f"{stem}.py"
    modules = LISTING.findall(script.read_text(encoding="utf-8")) if script.is_file() else []
    notebook = f"notebooks/{'zh/' if language() == 'zh' else ''}{stem}.ipynb"
    found = [(tr("the script", "脚本"), f"chapters/{stem}.py"), (tr("the notebook", "笔记本"), notebook)]
    found += [(m, m) for m in dict.fromkeys(modules)]
    figures = f"book/{stem.split('_')[0]}.py"
    if (ROOT / figures).is_file():
        found.append((figures + tr(" (its figures)", "（本章的图）"), figures))
    return found


def _write(path, text):
    """Write `text` to `path` unless it holds it already (the engine rebuilds a page whose file is newer)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write(folder, notebooks, intro, settings):
    """The Sphinx project of the edition spoken now (qwen.lang) in `folder`, from its executed `notebooks`
    ({stem: notebook}, in chapter order); `settings` (a dict) goes to conf.py as edition.json, with the pages' edit
    and Colab paths and sources added. Files of an earlier build that are no longer pages are removed."""
    chapter_of = {int(stem[2:4]): f"chapters/{stem}.ipynb" for stem in notebooks}
    found = exercises()
    links = {n: f"../exercises/{n}.md" for n in found}
    pages = {"index.md": index_page(intro, notebooks), "exercises/index.md": exercises_index(found)}
    for number, (exercise, meta, statement) in found.items():
        pages[f"exercises/{number}.md"] = exercise_page(number, exercise, meta, statement,
                                                        chapter_of.get(meta["chapter"]))
    for stem, nb in notebooks.items():
        pages[f"chapters/{stem}.ipynb"] = nbformat.writes(chapter_notebook(nb, links))
    readme = "README.zh.md" if language() == "zh" else "README.md"
    edit = {"index": "web/build.py", "exercises/index": "web/source.py"}  # where their words are
    edit |= {f"exercises/{n}": f"practice/{f.name}/{readme}" for n, (f, _, _) in found.items()}
    edit |= {f"chapters/{stem}": f"chapters/{stem}.py" for stem in notebooks}
    colab = {f"chapters/{stem}": f"notebooks/{'zh/' if language() == 'zh' else ''}{stem}.ipynb" for stem in notebooks}
    book = dict(settings, edit=edit, colab=colab, sources={f"chapters/{s}": sources(s) for s in notebooks})
    pages["edition.json"] = json.dumps(book, ensure_ascii=False, indent=1)
    pages["conf.py"] = (WEB / "conf.py").read_text(encoding="utf-8")
    for old in [p for p in folder.rglob("*") if p.is_file() and p.suffix in (".md", ".ipynb")]:
        if old.relative_to(folder).as_posix() not in pages:
            old.unlink()
    for name, text in pages.items():
        _write(folder / name, text)
    return folder
