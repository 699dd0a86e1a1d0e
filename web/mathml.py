"""Formulas as MathML, written at build time: the book's $…$ and $$…$$ (MyST's dollarmath) need no script and no
network to be read, print as they show, and follow the page's colours in dark mode. latex2mathml turns the TeX
into MathML, which every current browser draws. A Sphinx extension: html_math_renderer = "mathml" (web/conf.py).
"""
from docutils import nodes
from latex2mathml.converter import convert


def visit_math(self, node):
    self.body.append(f'<span class="math">{convert(node.astext(), display="inline")}</span>')
    raise nodes.SkipNode


def visit_displaymath(self, node):
    number = f'<span class="eqno">({node["number"]})</span>' if node.get("number") else ""
    ids = f' id="{node["ids"][0]}"' if node.get("ids") else ""
    self.body.append(f'<div class="math"{ids}>{number}{convert(node.astext(), display="block")}</div>')
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_displaymath, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
