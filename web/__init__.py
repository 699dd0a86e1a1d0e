"""The course as a book: every chapter a web page with its prose, its code, the printed output and the figures of a
run, the exercises' statements, the index, in English and Chinese. Built from the one source (the chapter scripts,
through the notebooks notebooks/sync.py writes), executed at build time and never committed.

    python -m web                 build into data/book/site/ and print the address of its index.html
    python -m web --serve         the same, then serve it on http://localhost:8000
    bash course.sh book           the same, after setting up .venv

What is ours: execute.py runs the notebooks (a cache keyed by what each one reads; on Linux each kernel is a fork of
warm.py's server, which has imported the heavy modules once); source.py writes each edition as a Sphinx project of
those executed notebooks; build.py is the command. What the engine does (Sphinx with MyST-NB and
sphinx-book-theme, settings in conf.py): lay the pages out with a sidebar, contents, dark mode and a phone layout,
render the markdown and the outputs, highlight code, search. mathml.py writes the formulas as MathML for it.
"""
