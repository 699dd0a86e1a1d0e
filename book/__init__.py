"""The course's book: what a chapter shows beside its code. Never imported by `qwen/`.

    import book
    book.show("ch03-rms", ch03.rms_figure, W)      # a figure: inline in a notebook; a script saves it with --figures
    book.show("ch03-map", book.model_map.draw, "norm")
    book.listing("qwen/norm.py")                     # the finished module (or chosen definitions of it)
    book.attempt(204, rms_norm, gated_rms_norm, l2norm)   # grade an in-notebook attempt with the judge
    book.notation(args.checkpoint)                   # the notation table: real 0.8B and this checkpoint
    book.proof(compare, ...)                         # the optional comparison with transformers

In a script, show/listing/attempt/proof print one line each, starting with "» " (NOTE in book/show.py); in a
notebook they show the thing itself. Matplotlib and transformers are imported only when something is drawn or
compared.

A chapter script (chapters/chNN_topic.py, written into its notebook by notebooks/sync.py) reads top to bottom:

1. Title and a paragraph on what this chapter adds; the model map with this chapter's part highlighted
   (`book.show("chNN-map", book.model_map.draw, "<part>")`).
2. `args = chapter_args(__doc__)` (it opens the checkpoint once, `args.checkpoint`, and prints the synthetic banner
   when it applies), then the story: short markdown, live code, short labelled prints. The banner is the run's one
   statement that the weights are random: after it a printed line says so only where random weights make its
   number mean something else than on the real model (generated tokens: "random weights: the tokens mean nothing";
   a perplexity; a random head's guesses), never on a number merely computed from the weights (an RMS, a timing, a
   difference between two paths), and a real checkpoint's run says nothing of it. A number the synthetic weights
   were built to have is never presented as a finding; where the real value is known, print it beside, marked
   "real Qwen3.5-0.8B" (qwen.sizes: real_config(), REAL_NAME; the dense sizes and their cache arithmetic:
   qwen.family).
3. The exercise, before the finished module: a markdown cell "try it first: python practice/judge.py start N",
   then a code cell holding the starter's stub (`def f(...): raise NotImplementedError`) with `book.attempt(N, f)`
   — a notebook grades it once the stub is replaced; a script says how to start and grade.
4. The finished module: `book.listing("qwen/<module>.py")`, then the prose that walks through it.
5. Figures: one cell each, one call, `book.show("chNN-what", chNN.some_figure, ...)`. Figure functions live in
   `book/chNN.py`, import matplotlib inside the function, return a Figure, say "synthetic weights" once in the
   title when random weights would give the figure another shape than the real model's (tests/helpers.py FIGURES),
   and are called by tests/test_book_chNN.py. No commented-out code.
6. "Try this": two or three prompts a learner can run and see change (a markdown cell).
7. "Show the proof": one cell, `book.proof(compare, ...)`, where `compare(transformers, ...)` prints the
   difference to transformers' module on the same checkpoint (book.oracle.difference) and says why it is 0 or
   how many bf16 steps.
8. Summary, a shapes recap (`book.notation(args.checkpoint)` or the rows of it that the chapter uses), the exercises
   again, and "How to explain it".
"""
from book import model_map
from book.oracle import proof
from book.shapes import notation
from book.show import attempt, in_notebook, listing, show

__all__ = ["attempt", "in_notebook", "listing", "model_map", "notation", "proof", "show"]
