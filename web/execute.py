"""Run a chapter's notebook in a kernel and keep the result: the book shows what a real run printed and drew.

A notebook is executed again only when something it reads has changed: its own cells, the course's code (qwen/,
book/, practice/), or the checkpoint it runs on. The hash of all three is written into the executed notebook
(data/book/executed/), so editing one chapter re-executes that chapter only, while editing qwen/norm.py
re-executes them all (any chapter may import it). The tests run the notebooks through execute() too.
"""
import hashlib
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError

from qwen.hub import DATA_DIR
from qwen.lang import tr
from qwen.synthetic import synthetic_path
from web import warm

ROOT = Path(__file__).resolve().parent.parent
CACHE = DATA_DIR / "book" / "executed"
SECONDS = 300  # per cell: a cell that runs longer is stopped; a guard against a hang, not a speed goal
KERNEL = "qwen-by-hand"
CODE = [("qwen", "*.py"), ("book", "*.py"), ("practice", "*.py"), ("practice", "*/*.py"), ("practice", "*/*.json"),
        ("practice", "*/*.toml")]  # what a chapter's cells can import or read


def kernel_spec(folder, model, lang="en"):
    """A kernel for this very Python in `folder`, whatever else is installed, its notebooks run on `model` (a
    notebook takes no --model: chapter_args reads QWEN_MODEL), in the language `lang` (QWEN_LANG), drawing inline."""
    spec = Path(folder) / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    env = {"QWEN_MODEL": str(model), "QWEN_LANG": lang, "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    launch = warm.command(env) if warm.supported() else [sys.executable, "-m", "ipykernel_launcher"]
    (spec / "kernel.json").write_text(json.dumps({
        # errors only in the kernel's own log: its warnings (a TCP connection on localhost) are noise here
        "argv": [*launch, "-f", "{connection_file}", "--log-level=ERROR"],
        "display_name": "qwen-by-hand", "language": "python", "env": env}))
    return Path(folder)


def execute(notebook, kernels):
    """Run `notebook` (a path) top to bottom in the kernel of `kernels` (kernel_spec), with notebooks/ as its
    working folder: (the notebook with its outputs, the error that stopped it or None)."""
    nb = nbformat.read(notebook, as_version=4)
    # the asynchronous manager, as nbclient makes for itself: with the blocking one its per-cell timeout never fires
    km = AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    client = NotebookClient(nb, km=km, timeout=SECONDS, resources={"metadata": {"path": str(ROOT / "notebooks")}})
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError) as e:
        return nb, str(e)
    finally:
        if km.has_kernel:  # a kernel manager handed to nbclient is ours to stop
            run_sync(km.shutdown_kernel)(now=True)
    return nb, None


def _hash(files):
    h = hashlib.sha256()
    for file in files:
        h.update(str(file.relative_to(ROOT) if file.is_relative_to(ROOT) else file.name).encode())
        h.update(file.read_bytes())
    return h


def checkpoint_key(model):
    """What identifies a checkpoint's outputs: a folder by its config and the names and sizes of its weight files;
    a hub id by its name (a run downloads what it names)."""
    folder = synthetic_path() if model == "synthetic" else Path(model)
    if not folder.is_dir():
        return str(model)
    files = [folder / "config.json"] if (folder / "config.json").is_file() else []
    sizes = sorted((f.name, f.stat().st_size) for f in folder.glob("*.safetensors"))
    return _hash(files).hexdigest() + json.dumps(sizes)


def key(notebook, model):
    """The hash of everything the notebook's outputs depend on."""
    code = sorted({f for folder, pattern in CODE for f in (ROOT / folder).glob(pattern)})
    h = _hash([Path(notebook), *code])
    h.update(checkpoint_key(model).encode())
    return h.hexdigest()


def executed(notebooks, model, kernels, cache=CACHE, say=print, jobs=1):
    """Each notebook of `notebooks` (paths) with its outputs, from the cache when its key is unchanged, else run
    now, `jobs` at a time (saying which, and how long each took): {stem: notebook}, in the order given. Stops at
    the first notebook that fails, naming it, its cell and the error; nothing half-run is kept."""
    cache.mkdir(parents=True, exist_ok=True)
    out, todo = {}, []
    for n, notebook in enumerate(notebooks, 1):
        name, want = Path(notebook).stem, key(notebook, model)
        kept = cache / f"{name}.ipynb"
        nb = nbformat.read(kept, as_version=4) if kept.is_file() else None
        if nb is not None and nb.metadata.get("book_key") == want:
            out[name] = nb
        else:
            todo.append((n, Path(notebook), want))

    def run(job):
        n, notebook, _ = job
        say(tr(f"[{n}/{len(notebooks)}] running {notebook.name} on {model} ...",
               f"[{n}/{len(notebooks)}] 在 {model} 上运行 {notebook.name} ……"), flush=True)
        start = time.perf_counter()
        return job, *execute(notebook, kernels), time.perf_counter() - start

    pool = ThreadPoolExecutor(max(1, jobs))  # each notebook runs in a kernel process of its own
    try:
        for (_, notebook, want), nb, error, seconds in pool.map(run, todo):
            if error is not None:
                pool.shutdown(wait=False, cancel_futures=True)
                raise SystemExit(tr(f"{notebook.name} stopped with an error; the book is not built:\n{error}\n"
                                    f"Fix: run the chapter (python chapters/{notebook.stem}.py) and fix what it says, "
                                    "then build again",
                                    f"{notebook.name} 出错停止，书没有生成：\n{error}\n"
                                    f"解决：运行这一章（python chapters/{notebook.stem}.py），按它说的修好，"
                                    "再生成一次"))
            say(tr(f"{notebook.name}: ran in {seconds:.0f} s", f"{notebook.name}：运行了 {seconds:.0f} 秒"), flush=True)
            nb.metadata["book_key"] = want
            nbformat.write(nb, cache / notebook.name)
            out[notebook.stem] = nb
    finally:
        pool.shutdown(wait=True)
    return {Path(n).stem: out[Path(n).stem] for n in notebooks}
