"""python -m web: build the book (see web/build.py)."""
from web.build import main

main()
