"""Every repository path the prose names exists: in a comment or docstring of any Python file, in a chapter's file tree
(its prose cells, both languages), in the READMEs, CONTRIBUTING, the problem statements and docs/, and in the
comments of course.sh, .ci/run, the workflows, pyproject.toml and constraints.txt. A file that moves leaves its old
name behind in the text that explains it; this test finds every such name, with its file and line. Files are read as
text, nothing is imported, so it takes a fraction of a second.

What counts as a path: a token that starts with one of the repository's top-level folders and a slash
(`qwen/norm.py`, `practice/204_rmsnorm/`), a top-level file by name (`course.sh`), or an entry of a chapter's
file tree, joined to the folder above it. A token with a placeholder is a pattern and must match something:
`NN`/`NNN` stand for digits (`book/chNN.py`, `practice/NNN_slug/`, the word after `NN_` naming any topic), `*` and
`<...>` for anything (`tests/test_<part>.py`). A module named the Python way (`qwen.family`, `book.ch03.REAL`)
counts too: its file exists, and a name after it is defined there."""
import fnmatch
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("qwen", "practice", "book", "chapters", "notebooks", "tests", "bench", "app", "web", "docs", ".ci",
           ".github", "data")
FILES = ("README.md", "README.zh.md", "CONTRIBUTING.md", "CONTRIBUTING.zh.md", "LICENSE", "main.py", "course.sh",
         "pyproject.toml", "constraints.txt", ".gitignore")
# A path token: a top-level folder and a slash, then path characters; not preceded by a path character, so that
# ~/.qwen-by-hand/data or https://…/docs/… are not read as repository paths. It ends before a trailing dot or comma.
# ASCII: a Chinese character next to a path is not part of it.
PATH = re.compile(r"(?<![\w./~:@-])(?:%s)/(?:[\w.*<>{}\[\]-]*[\w*>/}\]])?" % "|".join(map(re.escape, FOLDERS)),
                  re.ASCII)
FILE = re.compile(r"(?<![\w./~:@-])(?:%s)(?![\w/-])" % "|".join(map(re.escape, FILES)), re.ASCII)
# A module the Python way, and maybe a name in it: qwen.family, book.ch03.REAL. A one-letter module stands for any
# (`import qwen.x` in tests/test_imports.py's docstring).
MODULE = re.compile(r"(?<![\w./-])(qwen|book|practice|app|web)\.([A-Za-z_]\w+)(?:\.([A-Za-z_]\w*))?", re.ASCII)
# a Python file's strings and comments, in order: triple-quoted strings, one-line strings, comments
PIECE = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*')
STRING_PREFIXES = ("", "r", "u", "f", "rf", "fr")
TREE_ROOT = re.compile(r"^# ?([\w.-]+/)\s*(?:\S.*)?$")  # "# qwen/" opens a file tree's folder
TREE_ENTRY = re.compile(r"^# ?(?:├──|└──) (.+?)(?:\s{2,}|\s+[+~(（]|$)")  # "# ├── norm.py    + RMSNorm" -> norm.py
# A page of the built book (chapters/ch03_norm.html): the site mirrors chapters/ and practice/ in data/book/site/,
# which is generated and git-ignored; web/ holds the only .html files of the repository, its templates.
SITE_PAGE = re.compile(r"^(?!web/).*\.html(#.*)?$")
MARKDOWN = ["README.md", "README.zh.md", "CONTRIBUTING.md", "CONTRIBUTING.zh.md", "practice/README*.md",
            "practice/*/README*.md", "docs/*.md", "tests/hostile/README.md"]
COMMENTED = ["course.sh", ".ci/run", ".github/workflows/*.yml", "pyproject.toml", "constraints.txt"]  # `#` comments


def ignored():
    """A regular expression for .gitignore's entries: what they name is made on a learner's machine (checkpoints in
    data/, the judge's practice/work/, caches), so the prose may name it while no checkout holds it. An entry with a
    slash is anchored at the root (practice/work/); one without matches any component (__pycache__/, *.egg-info/)."""
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    entries = [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]
    part = lambda entry: fnmatch.translate(entry).removeprefix("(?s:").removesuffix(")\\Z")  # noqa: E731
    anchored = [part(e) for e in entries if "/" in e]
    anywhere = [part(e).replace(".*", "[^/]*") for e in entries if "/" not in e]
    return re.compile(rf"^(?:{'|'.join(anchored)})(?:/|$)|(?:^|/)(?:{'|'.join(anywhere)})(?:/|$)")


IGNORED = ignored()


def is_ignored(path):
    return IGNORED.search(path.strip("/")) is not None


def exists(path):
    """The path is in the checkout; a pattern (NN, NNN, *, <...>) matches at least one path in it."""
    glob = re.sub(r"<[^>]+>", "*", path.rstrip("/"))
    glob = re.sub(r"NNN?_[a-z]+", lambda m: m[0].split("_")[0] + "_*", glob)  # chNN_topic, NNN_slug: any name
    glob = glob.replace("NNN", "[0-9]" * 3).replace("NN", "[0-9]" * 2)
    if not any(c in glob for c in "*?["):
        return (ROOT / path).exists()
    return any(ROOT.glob(glob))


@functools.cache
def module_text(package, module):
    """The source of package/module.py, or of package/__init__.py when `module` is a name defined there (book.show
    is a function of book/); None when neither holds it."""
    for path in (ROOT / package / f"{module}.py", ROOT / package / module / "__init__.py"):
        if path.is_file():
            return path.read_text(encoding="utf-8")
    init = ROOT / package / "__init__.py"
    return "" if init.is_file() and defines(init.read_text(encoding="utf-8"), module) else None


def defines(source, name):
    """Whether the source defines `name`: a def or class, an assignment, or an import, at any indentation."""
    n = re.escape(name)
    return re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{n}\b|^\s*{n}\s*[:=]|^[\w, ]*\b{n}\b[\w, ]*=[^=]"
                     rf"|^\s*(?:from\s+\S+\s+)?import\b.*\b{n}\b|^\s*{n}\s*,", source, re.M) is not None


def module_missing(match):
    """Why a module named the Python way is not there, or None when it is."""
    package, module, name = match.groups()
    text = module_text(package, module)
    if text is None:
        return f"no module {package}.{module}"
    if name and text and not defines(text, name):
        return f"{package}/{module}.py defines no {name}"
    return None


def python_prose(path):
    """(line, text) of every comment and docstring of a Python file, at the line where it starts. One regular
    expression reads the file's strings and comments in order (so a # inside a string is no comment); a docstring is
    a triple-quoted string that stands alone on its lines, as a statement does."""
    source = path.read_text(encoding="utf-8")
    line, offset = 1, 0
    for match in PIECE.finditer(source):
        piece, start = match[0], match.start()
        if not piece.startswith("#"):
            before = source[source.rfind("\n", 0, start) + 1:start].strip()
            end = source.find("\n", match.end())
            after = source[match.end():end if end >= 0 else len(source)].strip()
            if piece[:3] not in ('"""', "'''") or before.lower() not in STRING_PREFIXES \
                    or after and not after.startswith("#"):
                continue  # a string in code: not prose
        line, offset = line + source.count("\n", offset, start), start
        yield line, piece


def tree_paths(pieces):
    """(line, path) of each entry of a file tree drawn in comments: `# book/` then `# ├── ch07.py` is book/ch07.py.
    An entry may list several names (`weights.py, hub.py`); `…` stands for earlier chapters' files."""
    folder = None
    for n, line in pieces:
        root = TREE_ROOT.match(line)
        if root and not line.startswith(("# ├", "# └")):
            folder = root[1] if root[1].rstrip("/") in FOLDERS else None
            continue
        entry = TREE_ENTRY.match(line)
        if not entry:
            if not line.startswith("# ") or not line[2:].strip():
                folder = None  # the tree ended
            continue
        if folder is None:
            continue
        for name in entry[1].split(","):
            name = name.strip()
            if name and name not in ("…", "...") and not name.startswith(("…", "...")):
                yield n, folder + name


def found(pieces, pattern):
    """(line, match) of every match of the pattern in the pieces of text, each (its first line, text)."""
    for n, text in pieces:
        for match in pattern.finditer(text):
            yield n + text.count("\n", 0, match.start()), match


def named_paths(pieces):
    """(line, path) of every path token in the pieces of text."""
    for pattern in (PATH, FILE):
        for n, match in found(pieces, pattern):
            yield n, match[0]


def sources():
    """(file, [(line, text)]) of the prose to check: Python comments and docstrings, and the markdown files."""
    for folder in FOLDERS:
        if not is_ignored(folder) and (ROOT / folder).is_dir():
            for path in sorted((ROOT / folder).rglob("*.py")):
                relative = path.relative_to(ROOT).as_posix()
                if not is_ignored(relative):
                    yield relative, list(python_prose(path))
    for path in sorted(ROOT.glob("*.py")):
        yield path.name, list(python_prose(path))
    for pattern in MARKDOWN:
        for path in sorted(ROOT.glob(pattern)):
            yield path.relative_to(ROOT).as_posix(), [(1, path.read_text(encoding="utf-8"))]
    for pattern in COMMENTED:
        for path in sorted(ROOT.glob(pattern)):
            lines = enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            yield path.relative_to(ROOT).as_posix(), [(n, line[line.index("#"):]) for n, line in lines if "#" in line]


def missing():
    """'file:line: path' for every path the prose names that the checkout does not hold, and every module."""
    bad = []
    for name, pieces in sources():
        paths = list(named_paths(pieces))
        if name.startswith("chapters/"):  # a chapter's tree is its prose cells' comment lines
            paths += tree_paths(pieces)
        for n, path in paths:
            if not is_ignored(path) and not SITE_PAGE.search(path) and not exists(path):
                bad.append(f"{name}:{n}: {path}")
        for n, match in found(pieces, MODULE):
            why = module_missing(match)
            if why:
                bad.append(f"{name}:{n}: {match[0]} ({why})")
    return sorted(bad, key=lambda b: (b.split(":")[0], int(b.split(":")[1])))


def test_every_path_the_prose_names_exists():
    bad = missing()
    assert not bad, f"{len(bad)} paths named in the prose are not in the repository:\n" + "\n".join(bad)


def test_a_moved_file_is_found_in_a_chapter_tree(tmp_path):
    """The tree reader itself: family.py drawn under book/ in a chapter's tree (the file is in qwen/) is reported
    with its line, and so is a path in a comment and in a docstring."""
    script = tmp_path / "chapters" / "ch99_test.py"
    script.parent.mkdir()
    script.write_text('"""Doc, see qwen/nowhere.py."""\n# %% [markdown]\n# ```\n# qwen/\n# ├── norm.py   (chapter 3)\n'
                      '# └── family.py   + sizes\n# book/\n# ├── family.py   (chapter 6)\n# └── ch07.py, ch99.py + the '
                      'figures\n# ```\n\n# %%\nx = 1  # as bench/nothing.py does\n', encoding="utf-8")
    lines = list(python_prose(script))
    paths = sorted(set(tree_paths(lines)) | set(named_paths(lines)))
    assert paths == [(1, "qwen/nowhere.py"), (4, "qwen/"), (5, "qwen/norm.py"), (6, "qwen/family.py"), (7, "book/"),
                     (8, "book/family.py"), (9, "book/ch07.py"), (9, "book/ch99.py"), (13, "bench/nothing.py")]
    assert [p for _, p in paths if not exists(p)] == ["qwen/nowhere.py", "book/family.py", "book/ch99.py",
                                                      "bench/nothing.py"]


def test_patterns_and_ignored_paths():
    """A pattern must match something; what .gitignore names is made on the learner's machine."""
    assert exists("book/chNN.py") and exists("practice/NNN_*/") and exists("chapters/chNN_topic.py")
    assert exists("tests/test_<part>.py") and exists("notebooks/zh/")
    assert not exists("book/chNNN.py") and not exists("practice/NN_*/") and not exists("qwen/<part>.ipynb")
    assert is_ignored("data/synthetic/config.json") and is_ignored("practice/work/204.py")
    assert not is_ignored("practice/204_rmsnorm/") and not is_ignored("qwen/data.py")


def test_a_module_named_the_python_way():
    """A module's file, a name of a package's __init__.py, and a name defined in a module are found; a name the
    module does not define is reported (the dense sizes' cache arithmetic is in qwen/family.py, not qwen/sizes.py)."""
    def why(text):
        return [module_missing(match) for match in MODULE.finditer(text)]

    assert why("qwen.family, qwen.family.cache_bytes, book.listing, book.ch03.REAL, practice.judge") == [None] * 5
    assert why("qwen.sizes.cache_bytes, then qwen.nowhere") == ["qwen/sizes.py defines no cache_bytes",
                                                                 "no module qwen.nowhere"]
