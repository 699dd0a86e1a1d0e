"""How a chapter shows what is not plain text: figures, listings of the finished module, and its exercises.

The same chapter code runs in two places. In a notebook a figure is drawn inline, a listing is shown as code, and
an exercise cell grades the learner's attempt with the judge. In a script each of these is one line (a figure is
saved to data/figures/ when the script ran with --figures), so the command line stays fast: matplotlib is imported
only when something is drawn. Lines that only a script prints start with NOTE, so a test can tell them apart.
"""
import ast
import base64
import io
import json
import logging
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from qwen.hub import DATA_DIR
from qwen.lang import language, tr

ROOT = Path(__file__).resolve().parent.parent
FIGURES = DATA_DIR / "figures"  # data/figures/ in a checkout, outside site-packages after a non-editable install
NOTE = "» "  # starts every line that only the command line prints (the notebook shows the thing itself)
DPI = 150  # figures as PNG: sharp on a screen, in a notebook, a saved file and the book alike
# Fonts with CJK glyphs that matplotlib can fall back to, most common first (Linux, macOS, Windows).
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "Droid Sans Fallback", "PingFang SC", "Hiragino Sans GB", "Microsoft YaHei",
             "SimHei", "Arial Unicode MS")
_warned_no_cjk = False  # the warning that Chinese figures have no font to draw with: once per run


def in_notebook():
    """True inside a Jupyter kernel (where a figure can be shown inline)."""
    return "ipykernel" in sys.modules


def note(text):
    print(NOTE + text)


def _shown(path):
    """A path as a learner would type it: relative to the course folder in a checkout, else in full."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def _notebook_name():
    """The notebook of the chapter script running (the Chinese one when the course speaks Chinese), or None."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script and script.suffix == ".py" and script.parent.name == "chapters":
        return f"notebooks/{'zh/' if language() == 'zh' else ''}{script.stem}.ipynb"
    return None


def show(name, draw, *args, **kwargs):
    """Draw the figure `draw(*args, **kwargs)` returns: inline in a notebook; in a script saved to
    data/figures/<name>.png when the script ran with --figures, else one line that says where to see it.
    Returns None, like listing and attempt, so that a notebook cell shows the thing once and no value after it."""
    if in_notebook():
        from IPython.display import display

        figure = _drawn(draw, *args, **kwargs)
        png, (width, _) = _png(figure)
        # shown at the size a 100-dpi figure would have, sharp on a high-resolution screen; its title travels with
        # it (the book's alt text), and the name says which figure it is
        display({"image/png": base64.b64encode(png).decode(),
                 "text/plain": tr(f"figure {name}: {title(figure)}", f"图 {name}：{title(figure)}")},
                raw=True, metadata={"image/png": {"width": round(width * 100 / DPI)},
                                    "book": {"figure": name, "title": title(figure)}})
        _close(figure)  # shown once: the inline backend must not show it again at the end of the cell
        return None
    if "--figures" not in sys.argv[1:]:
        saved, notebook = _shown(FIGURES / f"{name}.png"), _notebook_name()
        if notebook:
            note(tr(f"figure {name}: see it in {notebook}, or rerun with --figures to save it to {saved}",
                    f"图 {name}：在 {notebook} 里看，或者加上 --figures 重新运行，把它存到 {saved}"))
        else:
            note(tr(f"figure {name}: see it in the chapter's notebook, or rerun with --figures to save it to {saved}",
                    f"图 {name}：在本章的笔记本里看，或者加上 --figures 重新运行，把它存到 {saved}"))
        return None
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")  # a file, not a window: works without a display
    figure = _drawn(draw, *args, **kwargs)
    FIGURES.mkdir(parents=True, exist_ok=True)
    out = FIGURES / f"{name}.png"
    figure.savefig(out, dpi=DPI, bbox_inches="tight")
    _close(figure)
    note(tr(f"figure {name}: saved to {_shown(out)}", f"图 {name}：已存到 {_shown(out)}"))
    return None


def cjk_font():
    """The first font of CJK_FONTS that matplotlib has found on this machine, or None: the one place that looks."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    return next((f for f in CJK_FONTS if f in installed), None)


def font_families():
    """matplotlib's default sans-serif font, then the first installed CJK font (if any) for glyphs it lacks. When the
    course speaks Chinese and there is none, every Chinese label would be a row of boxes: said once, with what to
    install."""
    from matplotlib import font_manager, rcParams

    if not any(isinstance(f, _NearestWeight) for f in font_manager._log.filters):
        font_manager._log.addFilter(_NearestWeight())
    cjk = cjk_font()
    if cjk is None and language() == "zh":
        _warn_no_cjk_font()
    return [rcParams["font.sans-serif"][0]] + ([cjk] if cjk else [])


def _warn_no_cjk_font():
    """One line on stderr, the first time a Chinese figure finds no CJK font: what to install, and that matplotlib
    only sees a new font once its font cache is rebuilt. It stands for matplotlib's own warnings, one per missing
    character of every figure, which are silenced from then on."""
    global _warned_no_cjk
    if _warned_no_cjk:
        return
    _warned_no_cjk = True
    import matplotlib

    warnings.filterwarnings("ignore", r"Glyph \d+ .* missing from font", UserWarning)

    cache = matplotlib.get_cachedir()
    print(tr("warning: no CJK font found, so the Chinese text in the figures shows as empty boxes. Install one: on "
             "Debian/Ubuntu `sudo apt install fonts-noto-cjk` (or `fonts-wqy-zenhei`); macOS and Windows usually have "
             "PingFang SC and Microsoft YaHei; elsewhere Noto Sans CJK SC. Then delete matplotlib's font cache "
             f"({cache}) and run again",
             "警告：没有找到 CJK 字体，图里的中文会显示成方框。请装一种中文字体：Debian/Ubuntu 上运行 "
             "`sudo apt install fonts-noto-cjk`（或 `fonts-wqy-zenhei`）；macOS 和 Windows 一般自带 PingFang SC 和"
             "微软雅黑（Microsoft YaHei）；其他系统可以装 Noto Sans CJK SC。装好后删掉 matplotlib 的字体缓存"
             f"（{cache}）再运行"), file=sys.stderr)


class _NearestWeight(logging.Filter):
    """A CJK font may come in one weight only (WenQuanYi Zen Hei: 500): matplotlib draws its glyphs in that weight,
    as a fallback should, and would log a warning per figure that it is not 'normal'. That line is dropped."""

    def filter(self, record):
        return not record.getMessage().startswith("findfont: Failed to find font weight")


def _drawn(draw, *args, **kwargs):
    """draw(*args, **kwargs) with the first installed CJK font as a fallback for glyphs matplotlib's own font lacks:
    Chinese labels and titles (and tokens) are drawn, not boxes."""
    import matplotlib

    with matplotlib.rc_context({"font.family": font_families()}):
        return draw(*args, **kwargs)


def title(figure):
    """What a figure shows, in words: its title and its panels' titles (the alt text of its image)."""
    parts = [figure.get_suptitle()] + [axes.get_title() for axes in figure.axes]
    return " · ".join(p for p in parts if p) or tr("a figure", "一张图")


def _png(figure):
    """The figure as PNG bytes at DPI, and its size in pixels."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    png = buffer.getvalue()
    return png, (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big"))  # the IHDR chunk


def _close(figure):
    import matplotlib.pyplot as plt

    plt.close(figure)


def listing(path, *names):
    """The finished module at `path` (relative to the repository root), or only its top-level `names` (functions,
    classes), in the order given: shown as code in a notebook, one line in a script."""
    file = ROOT / path
    source = file.read_text(encoding="utf-8")
    if names:
        tree = ast.parse(source)
        found = {node.name: node for node in tree.body if hasattr(node, "name")}
        missing = [n for n in names if n not in found]
        if missing:
            raise ValueError(tr(f"{path} defines no {', '.join(missing)} (it has {', '.join(found)})",
                                f"{path} 里没有定义 {'、'.join(missing)}（它定义了 {'、'.join(found)}）"))
        source = "\n\n\n".join(ast.get_source_segment(source, found[n], padded=True) for n in names)
    if not in_notebook():
        what = tr(", ", "、").join(names) if names else \
            tr(f"{len(source.splitlines())} lines", f"共 {len(source.splitlines())} 行")
        note(tr(f"the finished code: {path} ({what}); the notebook shows it, or open the file",
                f"写好的代码：{path}（{what}）；笔记本里会显示，也可以直接打开这个文件"))
        return None
    from IPython.display import Code, display

    display(Code(source, language="python"), metadata={"book": {"listing": path, "names": list(names)}})
    return None


def exercise(number):
    """(folder, meta) of practice problem `number`, read from its meta.json."""
    folders = sorted((ROOT / "practice").glob(f"{number}_*"))
    if not folders or not (folders[0] / "meta.json").is_file():
        raise ValueError(tr(f"there is no practice problem {number} (see python practice/judge.py list)",
                            f"没有编号为 {number} 的练习（评测器能列出所有练习：python practice/judge.py list）"))
    return folders[0], json.loads((folders[0] / "meta.json").read_text(encoding="utf-8"))


def _is_stub(function):
    """A starter's body: it only raises NotImplementedError."""
    code = getattr(function, "__code__", None)
    return code is not None and code.co_names == ("NotImplementedError",)


def attempt(number: int, *functions: Callable, **named: Callable) -> None:
    """Exercise `number` at the point where the learner should try it. In a notebook: grade the functions given
    (defined in the notebook; by position, matched by their names, or as name=function like check() takes them)
    with the judge, unless they are still the starter's stubs. In a script: say how to start the exercise and
    grade it. With no functions (the reminder at the end of a chapter), a notebook points back to the exercise
    cell."""
    folder, meta = exercise(number)
    title = meta["title"].get(language(), meta["title"]["en"])
    wanted = tr(", ", "、").join(meta["functions"])
    code = "、".join(f"`{name}`" for name in meta["functions"])  # a function's name in a Chinese line, marked as code
    if not in_notebook():
        note(tr(f"exercise {number} ({title}): try it first. python practice/judge.py start {number} copies the "
                f"starter to practice/work/{folder.name}.py; write {wanted} there, then grade it with "
                f"python practice/judge.py {number}",
                f"练习 {number}（{title}）：先自己试试。python practice/judge.py start {number} 会把起始代码复制到 "
                f"practice/work/{folder.name}.py；在那里写好函数 {code}，再用评测器 python practice/judge.py {number} "
                "评测"))
        return None
    given = functions + tuple(named.values())
    if not given:  # the reminder at the end of a chapter: the functions live in the exercise cell earlier on
        print(tr(f"exercise {number} ({title}): write {wanted} in the exercise cell earlier in this notebook (the "
                 f"one that ends with book.attempt({number}, ...)) and run it to grade them there, or grade a file "
                 f"with python practice/judge.py start {number}, then python practice/judge.py {number}",
                 f"练习 {number}（{title}）：在本笔记本前面的练习单元格"
                 f"（以 book.attempt({number}, ...) 结尾的那个）里写好 {wanted}，运行这个单元格就会当场评测；"
                 f"也可以用评测器评测一个文件：先 python practice/judge.py start {number}，"
                 f"再 python practice/judge.py {number}"))
        return None
    if all(_is_stub(f) for f in given):
        print(tr(f"exercise {number} ({title}): replace the line that raises NotImplementedError in {wanted} with "
                 f"your code and run the cell again to grade it (statement: python practice/judge.py show {number})",
                 f"练习 {number}（{title}）：把 {wanted} 里抛出 NotImplementedError 的那一行换成你的代码，"
                 f"再运行这个单元格，交给评测器评分（题目见 python practice/judge.py show {number}）"))
        return None
    from practice.judge import check

    check(number, *functions, **named)  # prints the verdict
    return None
