"""Build the course as a static site: a page per chapter with what its run printed and drew, a page per exercise,
and the index, laid out by the engine (Sphinx, see web/conf.py). Nothing it writes is committed.

Run: python -m web [--model PATH|HUB_ID|synthetic] [--out DIR] [--serve [PORT]] [--repository URL [--commit SHA]
                   [--branch NAME]] [--jobs N]
                   [--lang en|zh] [--chapter N]
     bash course.sh book [same options]      (sets up .venv first)

By default the chapters run on the synthetic checkpoint, and every page says so; --model (or QWEN_MODEL) builds
the book from a real checkpoint's outputs. Both editions are built, English at the root and Chinese in zh/, each
page linking to itself in the other language. A second build re-executes only the chapters whose inputs changed, and
the engine lays out again only the pages whose files changed. --repository links each page to its files there, to
"edit this page" (a chapter's script) and to "open in Colab" (its notebook).
"""
import argparse
import datetime
import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from qwen.config import DEFAULT_MODEL
from qwen.hub import DATA_DIR
from qwen.lang import LANGUAGES, from_command_line, language, tr, use
from qwen.synthetic import is_synthetic, synthetic_path
from web import source
from web.execute import CACHE, executed, kernel_spec

ROOT = Path(__file__).resolve().parent.parent
SITE = DATA_DIR / "book" / "site"
WORK = DATA_DIR / "book" / "sphinx"  # each edition's project for the engine, and what the engine keeps between builds


def intro():
    return tr("""# Qwen3.5 by Hand

Build **Qwen3.5 from scratch in PyTorch**, one part per chapter, and prove every part equal to the reference
implementation (Hugging Face `transformers`). Each page below is a chapter as it ran: its prose, its code, what the
code printed and the figures it drew. The exercises are graded on your machine by the course's judge.

Run it yourself: clone the course, then `bash course.sh` runs every chapter, `bash course.sh lab` opens the
notebooks, `bash course.sh book` builds these pages.""", """# 手写 Qwen3.5

用 **PyTorch 从零实现 Qwen3.5**：每章实现一个部件，并证明它与参考实现（Hugging Face `transformers`）一致。
下面每一页都是一章实际运行的结果：正文、代码、代码的输出和画出的图。练习由课程自带的评测器在你自己的机器上评测。

自己动手：克隆课程后，`bash course.sh --lang zh` 依次运行每一章，`bash course.sh lab` 打开笔记本
（中文版在 `notebooks/zh/`），`bash course.sh book` 生成这些网页。""")


def banner(model):
    """The one line every page of a build on the synthetic checkpoint starts with (none on a real checkpoint)."""
    if not _synthetic(model):
        return None
    command = f"bash course.sh book --model {DEFAULT_MODEL}"
    return tr(f"Synthetic weights: the numbers and figures on these pages come from random weights in the real "
              f"Qwen3.5 layout. The real model’s book: <code>{command}</code>",
              f"合成权重：这些页面上的数字和图来自按真实 Qwen3.5 布局排列的随机权重。真实模型的版本："
              f"<code>{command}</code>")


def _synthetic(model):
    return model == "synthetic" or (Path(model).is_dir() and is_synthetic(model))


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def footer(model, commit):
    synthetic = tr("the synthetic checkpoint (random weights)", "合成检查点（随机权重）")
    ran_on = synthetic if _synthetic(model) else str(model)
    return tr(f"Outputs of a run on {ran_on}, built {datetime.date.today().isoformat()}"
              f"{f' from commit {commit}' if commit else ''}. Every page is written from the chapter scripts.",
              f"在{ran_on}上运行的输出，生成于 {datetime.date.today().isoformat()}"
              f"{f'（提交 {commit}）' if commit else ''}。每一页都由章节脚本生成。")


def sphinx(code, source, out, say=print):
    """Run the engine on one edition's project: HTML into `out`, its doctrees beside. What it warns of is said,
    each line naming the edition; an error stops the build, saying what the engine said."""
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d", str(out.parent / f"{out.name}-doctrees"),
               str(source), str(out)]
    start = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    for line in run.stderr.splitlines():
        say(f"{code}: {line}", flush=True)
    if run.returncode != 0:
        raise SystemExit(tr(f"the book's engine (Sphinx) failed on the {code} pages; the book is not built. Fix what "
                            "it says above, then build again",
                            f"书的引擎（Sphinx）在生成 {code} 版页面时出错，书没有生成。按上面的提示修好，再生成一次"))
    say(tr(f"{code} pages: laid out by the engine in {time.perf_counter() - start:.0f} s",
           f"{code} 版页面：引擎排版用了 {time.perf_counter() - start:.0f} 秒"), flush=True)


def build_site(editions, model, site=SITE, work=WORK, repository=None, commit=None, branch=None, say=print,
               jobs=2):
    """Write the book into `site`: the English edition at its root, the Chinese one in zh/, from `editions`
    ({language: {stem: executed notebook}}), each a Sphinx project in `work` built by the engine (a second build
    redoes only the pages whose files changed), `jobs` editions at a time. The path of its index.html."""
    spoken, commit_built = language(), _commit()
    folders = {code: site if code == "en" else site / code for code in editions}
    built = {}
    try:
        for code, notebooks in editions.items():
            use(code)
            other = next((c for c in editions if c != code), None)
            settings = {"root": str(ROOT), "language": code, "site": str(folders[code]), "banner": banner(model),
                        "footer": footer(model, commit_built), "repository": repository, "commit": commit,
                        "branch": branch, "other": other and {"prefix": "zh/" if other == "zh" else "../",
                                                              "lang": "zh-CN" if other == "zh" else "en",
                                                              "label": "中文" if other == "zh" else "English"}}
            built[code] = source.write(work / code, notebooks, intro(), settings)
    finally:
        use(spoken)
    lock = threading.Lock()  # one whole line at a time from the editions' threads

    def log(line, **_):
        with lock:
            say(line, flush=True)

    with ThreadPoolExecutor(max(1, min(jobs, len(built)))) as pool:  # each edition is a process of its own
        list(pool.map(lambda item: sphinx(item[0], item[1], work / "_build" / item[0], log), built.items()))
    shutil.rmtree(site, ignore_errors=True)
    for code in built:  # English first: the Chinese edition is a folder inside it
        shutil.copytree(work / "_build" / code, folders[code], ignore=shutil.ignore_patterns(".buildinfo", ".doctrees"))
    return site / "index.html"


def serve(site, port):
    """Serve the book on localhost: from the checkout when the site lies in it (the pages link to its files)."""
    home = ROOT if site.is_relative_to(ROOT) else site
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(home))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        url = f"http://127.0.0.1:{port}/{(site.relative_to(home) / 'index.html').as_posix()}"
        print(tr(f"serving the book at {url} (Ctrl-C stops it)", f"书在 {url} 上提供（Ctrl-C 停止）"), flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print()


def chapters(code, numbers=None):
    """The notebooks of edition `code`, in chapter order: every chapter's, or those `numbers` name."""
    found = sorted((ROOT / "notebooks" / ("" if code == "en" else code)).glob("ch[0-9][0-9]_*.ipynb"))
    return [nb for nb in found if not numbers or int(nb.name[2:4]) in numbers]


def main(argv=None):
    use(from_command_line(sys.argv[1:] if argv is None else argv))  # --help in the language asked for
    parser = argparse.ArgumentParser(prog="python -m web", description=tr(
        "Build the course as a static site: a page per chapter with what its run printed and drew, a page per "
        "exercise, an index with the course map, and a search box, in English and Chinese.",
        "把课程生成为静态网站：每章一页（附运行时打印的内容和画出的图），每道练习一页，一个带课程地图的首页和搜索框，"
        "中英两版。"))
    parser.add_argument("--model", default=os.environ.get("QWEN_MODEL") or "synthetic",
                        help=tr("checkpoint the chapters run on: a folder, a hub id or 'synthetic' (the default; "
                                "QWEN_MODEL sets it too)",
                                "各章运行所用的检查点：文件夹、hub id 或 'synthetic'（默认；也可用 QWEN_MODEL 设置）"))
    parser.add_argument("--out", type=Path, default=SITE, help=tr(f"where the site goes (default {SITE})",
                                                                  f"网站写到哪里（默认 {SITE}）"))
    parser.add_argument("--serve", nargs="?", const=8000, type=int, metavar="PORT",
                        help=tr("then serve it on http://127.0.0.1:PORT (default 8000)",
                                "生成后在 http://127.0.0.1:PORT 上提供它（默认 8000）"))
    parser.add_argument("--repository", help=tr("the course's repository (https://github.com/OWNER/REPO): each page "
                                                "then links its files there, to edit it and to open it in Colab",
                                                "课程的仓库（https://github.com/OWNER/REPO）：每页的文件链接、编辑此页"
                                                "和在 Colab 中打开都指向它"))
    parser.add_argument("--commit", help=tr("the commit the repository's links point at (default: main)",
                                            "仓库链接指向的提交（默认 main）"))
    parser.add_argument("--branch", help=tr("the branch an edit goes to (default: main)",
                                            "编辑提交到的分支（默认 main）"))
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help=tr("notebooks run at once, each in a kernel of its own (default 2)",
                                "同时运行几个笔记本，每个用一个单独的 Jupyter kernel（默认 2）"))
    parser.add_argument("--lang", choices=LANGUAGES, action="append",
                        help=tr("build only this edition (repeat for both; default: English and Chinese)",
                                "只生成这个语言的版本（可重复；默认中英两版都生成）"))
    parser.add_argument("--chapter", type=int, action="append", metavar="N",
                        choices=sorted(int(p.name[2:4]) for p in (ROOT / "chapters").glob("ch[0-9][0-9]_*.py")),
                        help=tr("build only this chapter's page (repeat for more; default: every chapter)",
                                "只生成这一章的页面（可重复；默认每一章）"))
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(tr(f"--jobs must be 1 or more (it is {args.jobs})", f"--jobs 至少是 1（现在是 {args.jobs}）"))
    if args.model == "synthetic":
        synthetic_path()  # made once, before the first chapter needs it
    subprocess.run([sys.executable, str(ROOT / "notebooks" / "sync.py")], check=True, cwd=ROOT)  # from the scripts
    with tempfile.TemporaryDirectory() as kernels:  # both editions' notebooks in one queue of --jobs
        editions = executed({code: (chapters(code, args.chapter), kernel_spec(Path(kernels) / code, args.model, code))
                             for code in args.lang or LANGUAGES}, args.model, cache=CACHE, jobs=args.jobs)
    index = build_site(editions, args.model, args.out.resolve(), repository=args.repository, commit=args.commit,
                       branch=args.branch, jobs=args.jobs)
    print(tr(f"the book: {index.as_uri()}", f"书已生成：{index.as_uri()}"))  # the last line: the address to open
    if args.serve is not None:
        serve(index.parent, args.serve)
