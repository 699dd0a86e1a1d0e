"""The course as a book: every chapter a web page with its prose, its code, the printed output and the figures of a
run, the exercises' statements, an index and a search box. Built from the one source (the chapter scripts, through
the notebooks notebooks/sync.py writes), executed at build time and never committed.

    python -m web                 build into data/book/site/ and print the path of its index.html
    python -m web --serve         the same, then serve it on http://localhost:8000
    bash course.sh book           the same, after setting up .venv

execute.py runs the notebooks (a cache keyed by what each one reads; on Linux each kernel is a fork of warm.py's
server, which has imported the heavy modules once), render.py turns one executed notebook into HTML, pages.py lays
out the pages and the search index, build.py is the command.
"""
