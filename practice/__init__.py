"""The course's exercises and their local judge. Run: python practice/judge.py --help (see practice/README.md)."""
