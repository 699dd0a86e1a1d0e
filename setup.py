"""The package build's one step that pyproject.toml cannot declare: practice/checksums.json, the sha256 of the files
that decide each exercise's verdict (practice/pinned.py), written into the built package, for an install without
git. A git checkout compares those files with its last commit instead, so no copy is committed and none goes stale."""
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, str(Path(__file__).resolve().parent / "practice"))
from pinned import write_manifest  # noqa: E402  (the standard library only; practice/ is not installed yet)


class BuildWithChecksums(build_py):
    def run(self):
        super().run()
        built = Path(self.build_lib)
        if not self.editable_mode and (built / "practice").is_dir():  # an editable install runs the checkout itself
            write_manifest(built / "practice", built)

    def get_outputs(self, include_bytecode=True):
        written = [] if self.editable_mode else [str(Path(self.build_lib) / "practice" / "checksums.json")]
        return super().get_outputs(include_bytecode) + written


setup(cmdclass={"build_py": BuildWithChecksums})
