"""The files that decide a problem's verdict, pinned: unless they are the course's own, the judge does not grade it.

What is pinned for a problem (`pinned_files`), as paths from the folder that holds practice/ and qwen/:
- its reference files: everything in its folder but the statements, the starter and the plug-in's swaps.py
  (wrong/*.py included: the judge runs those to recognise a mistake);
- the given files of practice/ that it imports (meta.json "given": 213's assembly.py);
- its oracle: the `qwen` modules whose code computes its expected values, that is, those its cases.py and given files
  import, directly or through each other (imports.import_closure reads import statements and runs nothing). The
  course's infrastructure, INFRASTRUCTURE below, is neither pinned nor followed: no expected value is computed by
  it, and a translation fix in qwen/lang.py or a new error message in qwen/hub.py must not stop the exercises. The
  rule is that list, nothing more: a new module an oracle imports is pinned until it is added there.

The course's own, compared with (`stale`):
- in a git checkout (git's HEAD holds the package's __init__.py: practice/__init__.py, qwen/__init__.py): the files
  of the last commit. A file edited and committed is the course's; one edited and not committed (or never
  committed) is not, and `git checkout -- FILE` restores it. Nothing to regenerate after an edit.
- elsewhere (an installed wheel): practice/checksums.json, which the package build writes (setup.py, with
  `write_manifest`): no copy is committed, so none can go stale. With neither (a source archive run in place)
  there is nothing to compare with, and the judge grades.

The standard library only: setup.py imports this module at build time.
"""
import hashlib
import json
import subprocess
from pathlib import Path

try:
    from practice.imports import import_closure, package_root
except ImportError:  # setup.py, building from the sources: practice/ is first on the path
    from imports import import_closure, package_root

# what no expected value is computed by: the language of messages, finding, downloading and opening checkpoints
# (which files, which config.json: a problem's numbers are read through it, not computed by it), the synthetic
# checkpoint (202 reads its shapes as an input, not as an expected value) and its tokenizer, the chapters' command
# line, timing, and the package's marker
INFRASTRUCTURE = ("qwen/__init__.py", "qwen/lang.py", "qwen/hub.py", "qwen/checkpoint.py", "qwen/synthetic.py",
                  "qwen/make_tokenizer.py", "qwen/course.py", "qwen/measure.py")
# a problem's statements and starter decide no verdict, nor where the plug-in puts its functions in the model
NOT_PINNED = ("README.md", "README.zh.md", "starter.py", "swaps.py")
MANIFEST = "checksums.json"


def sha256(path):
    """Line endings hashed as "\\n", so a copy that writes "\\r\\n" (git on Windows) matches."""
    return hashlib.sha256(Path(path).read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def is_reference(name):
    """True for a file of a problem folder (its name there, "cases.py", "wrong/x.py") that decides a verdict."""
    return name not in NOT_PINNED and not name.split("/")[-1].startswith(".") and not name.endswith(".pyc")


def reference_files(folder):
    """The files of a problem folder that decide a verdict: all but NOT_PINNED, with the whole-file known mistakes
    in wrong/."""
    folder = Path(folder)
    files = [f for f in folder.iterdir() if f.is_file()] + sorted((folder / "wrong").glob("*.py"))
    return sorted(f for f in files if is_reference(f.relative_to(folder).as_posix()))


def given_files(folder):
    """The files of practice/ outside the problem folder that its cases and the learner's file import (meta.json
    "given"), as names relative to practice/."""
    return list(json.loads((Path(folder) / "meta.json").read_text(encoding="utf-8")).get("given", []))


def oracle_files(folder, root=None):
    """{"qwen/rope.py": path}: the `qwen` modules the problem's cases.py and given files import, directly or through
    each other, but INFRASTRUCTURE; `root` holds the qwen/ to read (default: the one Python imports here)."""
    practice = Path(folder).parent
    root = Path(root) if root else package_root(practice.parent)
    return import_closure([Path(folder) / "cases.py"] + [practice / name for name in given_files(folder)], root,
                          skip=INFRASTRUCTURE)


def pinned_files(folder, root=None):
    """{"practice/204_rmsnorm/cases.py": path, ..., "qwen/norm.py": path}: what decides the problem's verdict."""
    folder, practice = Path(folder), Path(folder).parent
    files = {f"{practice.name}/{f.relative_to(practice).as_posix()}": f for f in reference_files(folder)}
    files.update({f"{practice.name}/{name}": practice / name for name in given_files(folder)})
    return files | oracle_files(folder, root)


def problem_folders(practice):
    return sorted(meta.parent for meta in Path(practice).glob("[0-9][0-9][0-9]_*/meta.json"))


# ---------------------------------------------------------------- the course's own: the last commit, else the build's

def _git(top, *args):
    """git's output in folder `top`, or None where git is missing or says no."""
    try:
        r = subprocess.run(["git", "-C", str(top), *args], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def _committed(base, files, folders):
    """{key: blob id at HEAD} for the pinned files under `base` (the folder holding practice/ or qwen/), with the
    reference files of `folders` (problem folders, as keys) that HEAD holds; None where `base` is no git checkout of
    the course (no git, no repository, or one whose HEAD lacks the package's __init__.py: a wheel in a virtual
    environment inside a checkout)."""
    top = _git(base, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    top = Path(top.decode().strip())
    try:
        prefix = Path(base).resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        return None
    where = "" if prefix == "." else prefix + "/"
    package = {key.split("/")[0] + "/__init__.py" for key in files}
    out = _git(top, "ls-tree", "-r", "-z", "HEAD", "--", *[where + k for k in sorted(set(files) | package | folders)])
    if out is None:
        return None
    head = {}
    for entry in filter(None, out.split(b"\0")):
        meta, path = entry.decode().split("\t", 1)
        head[path.removeprefix(where)] = meta.split()[2]
    if not package <= head.keys():
        return None
    return {k: blob for k, blob in head.items()
            if k in files or any(k.startswith(f + "/") and is_reference(k[len(f) + 1:]) for f in folders)}


def _against_git(base, files, folders):
    """The keys of `files` under `base` that differ from the last commit (edited, or not committed), with the
    reference files the commit holds that are gone; None where `base` is no git checkout of the course."""
    head = _committed(base, files, folders)
    if head is None:
        return None
    keys = sorted(k for k in files if Path(files[k]).is_file())
    out = _git(base, "hash-object", "--", *[str(files[k]) for k in keys]) if keys else b""
    if out is None:
        return None
    now = dict(zip(keys, out.decode().split()))
    return {k for k in head.keys() | files.keys() if head.get(k) != now.get(k)}


def manifest(practice, root=None):
    """{"about": ..., "sha256": {key: digest}}: every problem's pinned files, as the package build writes them."""
    digests = {}
    for folder in problem_folders(practice):
        digests.update({k: sha256(f) for k, f in pinned_files(folder, root).items() if f.is_file()})
    return {"about": "sha256 of each problem's pinned files (practice/pinned.py), written when the package is built; "
                     "a git checkout compares with its last commit instead",
            "sha256": dict(sorted(digests.items()))}


def write_manifest(practice, root=None):
    """practice/checksums.json, for an install without git (setup.py calls this on the built package)."""
    path = Path(practice) / MANIFEST
    path.write_text(json.dumps(manifest(practice, root), indent=1) + "\n", encoding="utf-8")
    return path


def _against_manifest(practice, files, folders):
    """The keys of `files` whose sha256 differs from practice/checksums.json, with the reference files it lists in
    `folders` that are gone; None without a manifest."""
    try:
        known = json.loads((Path(practice) / MANIFEST).read_text(encoding="utf-8"))["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(known, dict):
        return None
    gone = {k for k in known if k not in files and any(k.startswith(f + "/") for f in folders)}
    return gone | {k for k, f in files.items() if not f.is_file() or known.get(k) != sha256(f)}


def stale(folder, root=None):
    """(the pinned files of the problem in `folder` that are not the course's own, "git" or "build": what they were
    compared with); ([], None) where nothing can be compared (no git checkout and no manifest)."""
    folder = Path(folder)
    files = pinned_files(folder, root)
    problem = f"{folder.parent.name}/{folder.name}"
    seen = []  # (what the files under one base were compared with, those that differ): practice's, qwen's
    for base in dict.fromkeys(_base(k, f) for k, f in files.items()):
        mine = {k: f for k, f in files.items() if _base(k, f) == base}
        folders = {problem} if problem in {k.rsplit("/", 1)[0] for k in mine} else set()
        found, how = _against_git(base, mine, folders), "git"
        if found is None:
            found, how = _against_manifest(folder.parent, mine, folders), "build"
        if found is not None:
            seen.append((how, found))
    said = [how for how, found in seen if found] or [how for how, _ in seen] or [None]
    return sorted(k for _, found in seen for k in found), said[0]


def _base(key, path):
    """The folder that holds practice/ (or qwen/) for a pinned file: practice/204_rmsnorm/cases.py's grandparent's
    parent."""
    return Path(path).parents[len(Path(key).parts) - 1]
