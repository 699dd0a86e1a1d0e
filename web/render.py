"""One executed notebook as the body of a web page: its markdown as HTML, its code highlighted, and what each cell
printed and drew, in the order of the chapter.

Outputs come as the run left them. A figure (displayed by book.show) is written to a PNG file of its own and shown
with its title as the alt text; a listing (book.listing) is highlighted as the module it shows; printed text is
kept verbatim. Where the prose names an exercise ("exercise 204", "204 · ..."), the number links to its page.
"""
import base64
import html
import re

from markdown_it import MarkdownIt
from mdit_py_plugins.anchors import anchors_plugin
from pygments import highlight as pygmentize
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer, get_lexer_by_name
from pygments.util import ClassNotFound

FORMATTER = HtmlFormatter(nowrap=True)  # the spans only: wrapped in <pre class="code"> below
CODE_SPAN = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)  # left alone: code is never linked


def highlight(code, language="python"):
    """`code` as highlighted HTML (a <pre>); unknown languages and plain text stay plain."""
    try:
        lexer = PythonLexer() if language == "python" else get_lexer_by_name(language or "text")
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    return f'<pre class="code"><code>{pygmentize(code, lexer, FORMATTER)}</code></pre>'


def _slug(text):
    """A heading's anchor: lower case, words joined by '-', letters of any script kept."""
    return re.sub(r"[^\w]+", "-", text.lower()).strip("-") or "section"


MARKDOWN = (MarkdownIt("commonmark", {"highlight": lambda code, lang, attrs: highlight(code, lang)})
            .enable("table")
            .use(anchors_plugin, min_level=1, max_level=3, slug_func=_slug, permalink=True, permalinkSymbol="#"))


def link_exercises(markdown, exercises):
    """The markdown with each named exercise that exists (a number in `exercises`: {number: href}) made a link,
    outside code spans and blocks."""
    def link(match):
        number = int(match.group(2))
        return match.group(0) if number not in exercises else f"{match.group(1)}[{number}]({exercises[number]})"

    pieces = CODE_SPAN.split(markdown)
    return "".join(p if i % 2 else _link_all(p, link) for i, p in enumerate(pieces))


def _link_all(text, link):
    # "exercise 204", then the numbers that follow in a list ("210 · ..., 211 · ...") or "; 212 · ..."
    text = re.sub(r"\b([Ee]xercises?\**:? )(2\d\d)\b", link, text)
    return re.sub(r"(^|; |, |\n)(2\d\d)(?= · )", link, text)


def markdown(text, exercises=None):
    return MARKDOWN.render(link_exercises(text, exercises or {}))


def _text(output):
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def _pre(css, text):
    """A <pre> that shows `text` exactly: the HTML parser drops one newline right after <pre>, so one is added."""
    lead = "\n" if text.startswith("\n") else ""
    return f'<pre class="{css}">{lead}{html.escape(text)}</pre>'


def _streams(outputs):
    """The outputs with each run of same-named stream chunks joined into one: the kernel flushes stdout on a timer,
    so one printed line can arrive in two chunks (its text, then its newline)."""
    joined = []
    for output in outputs:
        previous = joined[-1] if joined else None
        if (output.output_type == "stream" and previous is not None and previous["output_type"] == "stream"
                and previous["name"] == output.name):
            previous["text"] += _text(output)
        else:
            joined.append(dict(output, text=_text(output)) if output.output_type == "stream" else output)
    return joined


def outputs(cell, figures):
    """The HTML of a code cell's outputs. A figure's PNG is handed to `figures(name, png_bytes)`, which returns
    the address the page shows it from."""
    parts = []
    for output in _streams(cell.get("outputs", [])):
        kind = output["output_type"]
        if kind == "stream":
            parts.append(_pre("output" if output["name"] == "stdout" else "output stderr", output["text"]))
        elif kind == "error":
            parts.append(f'<pre class="output stderr">{html.escape(output.ename)}: {html.escape(output.evalue)}</pre>')
        elif kind in ("display_data", "execute_result"):
            parts.append(_display(output, figures))
    return "\n".join(parts)


def _display(output, figures):
    data, meta = output.get("data", {}), output.get("metadata", {})
    book = meta.get("book", {})
    if "image/png" in data:
        name = book.get("figure", "figure")
        title = book.get("title") or data.get("text/plain", name)
        src = figures(name, base64.b64decode(data["image/png"]))
        width = meta.get("image/png", {}).get("width")
        size = f' width="{width}"' if width else ""
        return (f'<figure id="fig-{html.escape(name)}"><a href="{src}"><img src="{src}" alt="{html.escape(title)}"'
                f'{size}></a><figcaption>{html.escape(title)}</figcaption></figure>')
    if "listing" in book:
        names = ", ".join(book.get("names", []))
        head = f'{book["listing"]}{f" ({names})" if names else ""}'
        return f'<div class="listing"><div class="listing-name">{html.escape(head)}</div>' \
               f'{highlight(data.get("text/plain", ""))}</div>'
    text = data.get("text/plain", "")
    return _pre("output", text if isinstance(text, str) else "".join(text))


def body(nb, figures, exercises=None):
    """The page's main HTML: every cell in order, markdown rendered, code highlighted with its outputs below."""
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(f'<div class="prose">{markdown(cell.source, exercises)}</div>')
        elif cell.cell_type == "code" and cell.source.strip():
            parts.append(f'<div class="cell">{highlight(cell.source)}{outputs(cell, figures)}</div>')
    return "\n".join(parts)


def title(nb):
    """The text of the notebook's first heading."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if found:
                return found.group(1).strip()
    return "untitled"


def plain_text(html_text):
    """Words a search can find in a piece of HTML."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", html_text))).strip()
