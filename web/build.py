"""Build the course as a static site: a page per chapter with what its run printed and drew, a page per exercise,
an index with the course map, and a search box. Nothing it writes is committed.

Run: python -m web [--model PATH|HUB_ID|synthetic] [--out DIR] [--serve [PORT]] [--source-url URL] [--jobs N]
                   [--lang en|zh]
     bash course.sh book [same options]      (sets up .venv first)

By default the chapters run on the synthetic checkpoint, and every page says so; --model (or QWEN_MODEL) builds
the book from a real checkpoint's outputs. Both editions are built, English at the root and Chinese in zh/, each
page linking to itself in the other language. A second build re-executes only the chapters whose inputs changed.
"""
import argparse
import datetime
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pygments.formatters import HtmlFormatter

from qwen.config import DEFAULT_MODEL
from qwen.hub import DATA_DIR
from qwen.lang import LANGUAGES, from_command_line, language, tr, use
from qwen.synthetic import is_synthetic, synthetic_path
from web import pages
from web.execute import CACHE, executed, kernel_spec

ROOT = Path(__file__).resolve().parent.parent
SITE = DATA_DIR / "book" / "site"
STATIC = Path(__file__).resolve().parent / "static"


def intro():
    return tr("""# Qwen3.5 by Hand

Build **Qwen3.5 from scratch in PyTorch**, one part per chapter, and prove every part equal to the reference
implementation (Hugging Face `transformers`). Each page below is a chapter as it ran: its prose, its code, what the
code printed and the figures it drew. The exercises are graded on your machine by the course's judge.

Run it yourself: clone the course, then `bash course.sh` runs every chapter, `bash course.sh lab` opens the
notebooks, `bash course.sh book` builds these pages.""", """# 手写 Qwen3.5

用 **PyTorch 从零实现 Qwen3.5**：每章一个部件，每个部件都证明与参考实现（Hugging Face `transformers`）相等。
下面每一页都是一章实际运行的样子：正文、代码、代码打印的内容和画出的图。练习由课程的评测器在你的机器上评测。

自己动手：克隆课程后，`bash course.sh --lang zh` 依次运行每一章，`bash course.sh lab` 打开笔记本
（中文版在 `notebooks/zh/`），`bash course.sh book` 生成这些网页。""")


def banner(model):
    """What every page says first when its numbers come from the synthetic checkpoint."""
    if not _synthetic(model):
        return None
    return tr("Built on the synthetic checkpoint: random weights in the real Qwen3.5 layout (its tensor names, dtypes, "
              "depth, layer pattern and vocabulary; narrow widths). Every number and figure drawn from the weights is "
              "synthetic; where the real value is known, the page prints it beside, marked “real Qwen3.5-0.8B”. "
              f"The real model's pages: QWEN_MODEL={DEFAULT_MODEL} bash course.sh book (a download of about 1.7 GB).",
              "本书在合成检查点上生成：按真实 Qwen3.5 布局排列的随机权重（张量名、数据类型、层数、层型排列和"
              "词表都是真的；各层宽度很窄）。凡是从权重算出的数字和图都是合成的；知道真实值的地方，页面会在旁边打印出来，"
              f"标为“真实 Qwen3.5-0.8B”。真实模型的版本：QWEN_MODEL={DEFAULT_MODEL} bash course.sh book"
              "（需下载约 1.7 GB）。")


def _synthetic(model):
    return model == "synthetic" or (Path(model).is_dir() and is_synthetic(model))


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def edition(notebooks, model, site, source_url=None, other=None):
    """One language's pages (the language qwen.lang speaks now) from its executed `notebooks` ({stem: notebook},
    in chapter order), written into `site`; `other` is the other edition's folder, for the language switch."""
    chapter_of = {int(stem[2:4]): f"chapters/{stem}.html" for stem in notebooks}
    exercises = pages.exercise_pages(chapter_of)
    chapters = pages.chapter_pages(notebooks, site, exercises)
    every = [pages.index_page(chapters, exercises, intro()), *chapters, pages.exercises_index(exercises),
             *exercises.values()]
    synthetic = tr("the synthetic checkpoint (random weights)", "合成检查点（随机权重）")
    ran_on = synthetic if _synthetic(model) else str(model)
    commit = _commit()
    footer = tr(f"Outputs of a run on {ran_on}, built {datetime.date.today().isoformat()}"
                f"{f' from commit {commit}' if commit else ''}. Every page is written from the chapter scripts.",
                f"在{ran_on}上运行的输出，生成于 {datetime.date.today().isoformat()}"
                f"{f'（提交 {commit}）' if commit else ''}。每一页都由章节脚本生成。")
    pages.write(site, every, banner(model), footer, source_url, other)
    (site / "static").mkdir(parents=True, exist_ok=True)
    css = (STATIC / "book.css").read_text(encoding="utf-8") + HtmlFormatter().get_style_defs("pre.code")
    (site / "static" / "book.css").write_text(css, encoding="utf-8")
    shutil.copy(STATIC / "search.js", site / "static" / "search.js")
    records = json.dumps(pages.search_index(every), ensure_ascii=False)
    (site / "search-index.js").write_text(f"window.SEARCH_INDEX = {records};\n", encoding="utf-8")


def build_site(editions, model, site=SITE, source_url=None):
    """Write the book into `site`: the English edition at its root, the Chinese one in zh/, from `editions`
    ({language: {stem: executed notebook}}). The path of its index.html."""
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    folders = {code: site if code == "en" else site / code for code in editions}
    spoken = language()
    try:
        for code, notebooks in editions.items():
            use(code)
            other = next((folder for c, folder in folders.items() if c != code), None)
            edition(notebooks, model, folders[code], source_url, other)
    finally:
        use(spoken)
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
    parser.add_argument("--source-url", help=tr("link the course's files here instead of into the checkout "
                                                "(e.g. https://github.com/OWNER/REPO/blob/COMMIT/)",
                                                "课程文件的链接指向这里，而不是本地检出"
                                                "（例如 https://github.com/OWNER/REPO/blob/COMMIT/）"))
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help=tr("notebooks run at once, each in a kernel of its own (default 2)",
                                "同时运行的笔记本数，每个在自己的内核里（默认 2）"))
    parser.add_argument("--lang", choices=LANGUAGES, action="append",
                        help=tr("build only this edition (repeat for both; default: English and Chinese)",
                                "只生成这个语言的版本（可重复；默认中英两版都生成）"))
    args = parser.parse_args(argv)
    if args.model == "synthetic":
        synthetic_path()  # made once, before the first chapter needs it
    subprocess.run([sys.executable, str(ROOT / "notebooks" / "sync.py")], check=True, cwd=ROOT)  # from the scripts
    with tempfile.TemporaryDirectory() as kernels:  # both editions' notebooks in one queue of --jobs
        editions = executed({code: (sorted((ROOT / "notebooks" / ("" if code == "en" else code)).glob(
            "ch[0-9][0-9]_*.ipynb")), kernel_spec(Path(kernels) / code, args.model, code))
            for code in args.lang or LANGUAGES}, args.model, cache=CACHE, jobs=args.jobs)
    index = build_site(editions, args.model, args.out.resolve(), args.source_url)
    print(tr(f"the book: {index.as_uri()}", f"书已生成：{index.as_uri()}"))  # the last line: the address to open
    if args.serve is not None:
        serve(index.parent, args.serve)
