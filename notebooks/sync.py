"""Write the notebooks from the chapter scripts: chapters/chNN_topic.py -> notebooks/chNN_topic.ipynb.

The scripts are the one source. They are jupytext "percent" files: `# %%` starts a code cell, `# %% [markdown]` a
markdown cell. Each English markdown cell is followed by its Chinese one, `# %% [markdown] lang="zh"`: the English
notebook (notebooks/chNN_topic.ipynb) leaves the Chinese cells out, the Chinese one (notebooks/zh/chNN_topic.ipynb)
puts each in place of the English cell before it and sets QWEN_LANG=zh in a first code cell, so that what the code
prints is Chinese too (qwen.lang); a line break between two Chinese characters is joined (qwen.lang.unwrap). The
code cells are the same in both. Every code cell is live in both: a figure is one call, `book.show(name, draw, ...)`,
that draws inline in the notebook and prints one line (or saves the figure, with --figures) on the command line. So a script
holds no commented-out code: a cell marked `active="ipynb"` (notebook-only) is refused. The script's docstring (its
run command) is left out of the notebook.
Two things a notebook does differently from the command line are written in: a notebook shows the value of a cell's
last expression, which the script never prints, so such an expression ends with `;` there (unless it is a print or a
book.show/listing/attempt, which return None); and a notebook takes no --model, so the markdown's "`--model X`"
reads "`QWEN_MODEL=X`" there (the environment variable chapter_args reads in a notebook). And a notebook's first code
cell, which does nothing anywhere else, fetches and installs the course on Google Colab (where the book's "open in
Colab" takes it), from the repository pyproject.toml names ([project.urls] Repository).
Notebooks are written without outputs, with ids taken from each cell's content and fixed metadata, so writing them
again gives the same bytes. tests/test_notebooks.py fails when one is out of date.

Run: python notebooks/sync.py           rewrite every notebook whose script changed
     python notebooks/sync.py --check   write nothing; exit 1 naming each notebook that is out of date
"""
import ast
import hashlib
import json
import re
import sys
from pathlib import Path

import jupytext
import nbformat

from qwen.lang import unwrap

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same reader, as a package (a dependency there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS, NOTEBOOKS, PROJECT = ROOT / "chapters", ROOT / "notebooks", ROOT / "pyproject.toml"
CELL_KEYS = ("tags",)  # the cell metadata the scripts may set; anything Jupyter adds on a run is dropped
METADATA = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}


def scripts():
    return sorted(CHAPTERS.glob("ch[0-9][0-9]_*.py"))


LANGUAGES = ("en", "zh")
def _repository():
    """The course's repository, [project.urls] Repository in pyproject.toml (None where it names none)."""
    project = tomllib.loads(PROJECT.read_text(encoding="utf-8"))["project"]
    return project.get("urls", {}).get("Repository")


def on_colab():
    """A notebook's first code cell: on Google Colab (opened from the book's "open in Colab"), fetch the course and
    install it, then work in its notebooks/ folder, as a checkout would; anywhere else it does nothing."""
    url = _repository()
    say = "# On Google Colab: fetch the course and install it (about a minute). Anywhere else: nothing to do."
    fetch = (f'    if not os.path.isdir(COURSE):\n'
             f'        subprocess.run(["git", "clone", "-q", "--depth", "1", "{url}", COURSE], check=True)\n'
             f'        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", COURSE], check=True)\n'
             if url else
             '    if not os.path.isdir(COURSE):  # pyproject.toml names no [project.urls] Repository to fetch\n'
             '        raise SystemExit("clone the course into " + COURSE + " first (git clone URL " + COURSE + ")")\n')
    return (f"{say}\nimport os\nimport subprocess\nimport sys\n\nif \"google.colab\" in sys.modules:\n"
            f"    COURSE = \"/content/qwen-by-hand\"\n{fetch}    sys.path.insert(0, COURSE)\n"
            f"    os.chdir(os.path.join(COURSE, \"notebooks\"))")


SPEAK_CHINESE = ('import os\n\nos.environ["QWEN_LANG"] = "zh"  # 本笔记本说中文：代码打印的文字和图的标题也用中文'
                 '（qwen/lang.py）')


def notebook_of(script, lang="en"):
    return (NOTEBOOKS if lang == "en" else NOTEBOOKS / lang) / f"{Path(script).stem}.ipynb"


def _is_docstring(source):
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)


def _clean(nb):
    """No outputs, no run metadata, ids from content: the same notebook always serialises to the same bytes."""
    seen = set()
    for cell in nb.cells:
        cell.metadata = {k: cell.metadata[k] for k in CELL_KEYS if k in cell.metadata}
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.pop("attachments", None)
        base = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()[:8]
        cell.id, n = base, 1
        while cell.id in seen:  # two identical cells: number the later ones
            n += 1
            cell.id = f"{base}-{n}"
        seen.add(cell.id)
    nb.metadata = json.loads(json.dumps(METADATA))
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


SHOWS_NOTHING = {"print", "book.show", "book.listing", "book.attempt"}  # calls that return None: nothing to silence
MODEL_OPTION = re.compile(r"`--model ([^`\s]+)`")  # "`--model X`" in the markdown: a command-line option


def _silenced(source):
    """The cell with `;` after its last statement when that is an expression whose value a notebook would show
    (`torch.manual_seed(0)` shows a Generator): the script prints nothing there, and neither does the notebook."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return source
    last = body[-1] if body else None
    if not isinstance(last, ast.Expr):
        return source
    if isinstance(last.value, ast.Call) and ast.unparse(last.value.func) in SHOWS_NOTHING:
        return source
    lines = source.split("\n")
    line = lines[last.end_lineno - 1].encode()  # col_offset counts UTF-8 bytes
    if line[last.end_col_offset:].lstrip().startswith(b";"):
        return source
    lines[last.end_lineno - 1] = (line[:last.end_col_offset] + b";" + line[last.end_col_offset:]).decode()
    return "\n".join(lines)


def render(script, lang="en"):
    """The notebook text for a chapter script, in `lang`."""
    nb = jupytext.reads(Path(script).read_text(encoding="utf-8"), fmt="py:percent")
    if nb.cells and nb.cells[0].cell_type == "code" and _is_docstring(nb.cells[0].source):
        nb.cells.pop(0)  # the run command: the notebook's first cell is the chapter's title instead
    cells = []
    for cell in nb.cells:
        if cell.metadata.get("lang") == "zh":  # the Chinese of the markdown cell before it
            if lang == "zh" and cells and cells[-1].cell_type == "markdown":
                cell.source = unwrap(cell.source)
                cells[-1] = cell
            continue
        cells.append(cell)
    first = 1 if cells and cells[0].cell_type == "markdown" else 0  # after the title
    if lang == "zh":
        cells.insert(first, nbformat.v4.new_code_cell(SPEAK_CHINESE))
    cells.insert(first, nbformat.v4.new_code_cell(on_colab()))  # the same in both editions, as every code cell
    nb.cells = cells
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = _silenced(cell.source)
        elif cell.cell_type == "markdown":
            cell.source = MODEL_OPTION.sub(r"`QWEN_MODEL=\1`", cell.source)
    return _clean(nb)


def without_run(text):
    """A notebook as it would be before anyone ran it: what Jupyter adds when a learner runs and saves is removed."""
    return _clean(nbformat.reads(text, as_version=4))


def untranslated(script):
    """Where the script's prose lacks its Chinese: an English markdown cell with no `lang="zh"` cell right after it,
    or a Chinese cell that follows no English one. Empty when the two editions are complete."""
    script = Path(script)
    bad, previous = [], None
    for n, line in enumerate(script.read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("# %%"):
            continue
        kind = "zh" if 'lang="zh"' in line else "markdown" if "[markdown]" in line else "code"
        if kind == "zh" and (previous is None or previous[0] != "markdown"):
            bad.append(f"{script.name}:{n}: a Chinese cell that follows no English markdown cell")
        if kind != "zh" and previous and previous[0] == "markdown":
            bad.append(f"{script.name}:{previous[1]}: a markdown cell without its Chinese cell after it")
        previous = (kind, n)
    if previous and previous[0] == "markdown":
        bad.append(f"{script.name}:{previous[1]}: a markdown cell without its Chinese cell after it")
    return bad


def notebook_only_cells(script):
    """The script's notebook-only (`active=...`) cells, each refused: the command line would never run them."""
    script = Path(script)
    return [f"{script.name}:{n}: a notebook-only cell; make it a live cell (a figure: book.show(...))"
            for n, line in enumerate(script.read_text(encoding="utf-8").splitlines(), 1)
            if line.startswith("# %%") and re.search(r'\bactive="', line)]


def main(argv):
    check = argv == ["--check"]
    if argv and not check:
        sys.exit(__doc__)
    bad = [line for script in scripts() for line in notebook_only_cells(script)]
    if bad:  # fix the script before writing anything
        sys.exit("chapter scripts hold live code only:\n" + "\n".join(bad))
    stale = []
    for script in scripts():
        for lang in LANGUAGES:
            nb, text = notebook_of(script, lang), render(script, lang)
            if nb.is_file() and nb.read_text(encoding="utf-8") == text:
                continue
            stale.append(nb.relative_to(ROOT))
            if not check:
                nb.parent.mkdir(exist_ok=True)
                nb.write_text(text, encoding="utf-8")
                print(f"wrote {nb.relative_to(ROOT)}")
    if check and stale:
        sys.exit(f"out of date: {', '.join(map(str, stale))}; run: python notebooks/sync.py")
    if not stale:
        print(f"all {len(scripts()) * len(LANGUAGES)} notebooks ({len(scripts())} chapters, English and Chinese) are "
              "up to date")
    missing = [line for script in scripts() for line in untranslated(script)]
    if missing:  # written anyway, the English standing in; tests/test_notebooks.py fails until it is translated
        print(f"{len(missing)} markdown cells have no Chinese yet, e.g. {missing[0]}")


if __name__ == "__main__":
    main(sys.argv[1:])
