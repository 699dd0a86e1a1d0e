"""Run a chapter's notebook in a kernel and keep the result: the book shows what a real run printed and drew.

A notebook is executed again only when something it reads has changed: its own cells, the course's code (qwen/,
book/, practice/), or the checkpoint it runs on. The hash of all three is written into the executed notebook
(data/book/executed/), so editing one chapter re-executes that chapter only, while editing qwen/norm.py
re-executes them all (any chapter may import it). The tests run the notebooks through execute() too.
"""
import hashlib
import json
import sys
import threading
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


def executed(editions, model, cache=CACHE, say=print, jobs=1):
    """The notebooks of every edition with their outputs: `editions` is {language: (notebook paths, kernels)}, each
    edition with its own kernel_spec and its own folder under `cache`. A notebook comes from the cache when its key is
    unchanged, else runs now: `jobs` at a time, the editions' notebooks in one queue, each line of the log (which
    edition and chapter starts, how long it took) written whole. Returns {language: {stem: notebook}}, in the order
    given. Stops at the first notebook that fails, naming it, its cell and the error; nothing half-run is kept."""
    out, todo = {code: {} for code in editions}, []
    for code, (notebooks, kernels) in editions.items():
        (cache / code).mkdir(parents=True, exist_ok=True)
        for notebook in map(Path, notebooks):
            want = key(notebook, model)
            kept = cache / code / notebook.name
            nb = nbformat.read(kept, as_version=4) if kept.is_file() else None
            if nb is not None and nb.metadata.get("book_key") == want:
                out[code][notebook.stem] = nb
            else:
                todo.append((code, notebook, kernels, want))
    lock = threading.Lock()  # the pool's threads and this one: one line at a time, never two run together

    def log(line):
        with lock:
            say(line, flush=True)

    def run(job):
        n, (code, notebook, kernels, _) = job
        log(tr(f"[{n}/{len(todo)}] {code} {notebook.name}: running on {model} ...",
               f"[{n}/{len(todo)}] {code} {notebook.name}：在 {model} 上运行 ……"))
        start = time.perf_counter()
        return *execute(notebook, kernels), time.perf_counter() - start

    pool = ThreadPoolExecutor(max(1, jobs))  # each notebook runs in a kernel process of its own
    try:
        for (code, notebook, _, want), (nb, error, seconds) in zip(todo, pool.map(run, enumerate(todo, 1))):
            if error is not None:
                pool.shutdown(wait=False, cancel_futures=True)
                raise SystemExit(tr(f"{code} {notebook.name} stopped with an error; the book is not built:\n{error}\n"
                                    f"Fix: run the chapter (python chapters/{notebook.stem}.py --lang {code}) and fix "
                                    "what it says, then build again",
                                    f"{code} {notebook.name} 出错停止，书没有生成：\n{error}\n"
                                    f"解决：运行这一章（python chapters/{notebook.stem}.py --lang {code}），"
                                    "按它说的修好，再生成一次"))
            log(tr(f"{code} {notebook.name}: ran in {seconds:.0f} s",
                   f"{code} {notebook.name}：运行了 {seconds:.0f} 秒"))
            nb.metadata["book_key"] = want
            nbformat.write(nb, cache / code / notebook.name)
            out[code][notebook.stem] = nb
    finally:
        pool.shutdown(wait=True)
    return {code: {Path(n).stem: out[code][Path(n).stem] for n in notebooks}
            for code, (notebooks, _) in editions.items()}
