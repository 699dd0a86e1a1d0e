"""The two official Qwen3.5 chat templates: their pinned sha256 (what the tests that compare the course's renderer
with them accept: tests/helpers.py `chat_template`), and how to fetch them into a folder for $QWEN_CHAT_TEMPLATES.

The course does not ship the templates. Where the course's own test fixtures are not at hand (a fork's CI, a
contributor's clone), they come from PyPI: the `trl` package keeps byte-for-byte copies of them for identity
comparison (`trl/chat_templates/qwen3_5_nothink.jinja`, shipped by the 0.8B and 2B, and `qwen3_5_think.jinja`,
shipped by 4B and up). One pinned wheel is downloaded with pip (no dependency installed, nothing imported from it),
the two files are read out of it, and they are written only if each has the sha256 pinned here. Standard library
only, so CI can compute the cache key before anything is installed.

    python tests/official_templates.py FOLDER           fetch, check and write the two files into FOLDER
    python tests/official_templates.py FOLDER --wheel W  the same from a trl wheel already downloaded
    python tests/official_templates.py --key            print the cache key: the pinned digests (CI caches on it)
"""
import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# The two official Qwen3.5 chat templates, byte for byte as the published checkpoints ship them
# (chat_template.jinja, or the chat_template field of tokenizer_config.json): file name -> (sha256, the template's
# default for thinking). The 0.8B and 2B ship the first, 4B and larger the second; they differ only in the
# generation-prompt block.
TEMPLATES = {
    "qwen3_5_0.8b_2b.jinja": ("273d8e0e683b885071fb17e08d71e5f2a5ddfb5309756181681de4f5a1822d80", False),
    "qwen3_5_4b_and_up.jinja": ("a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715", True),
}
TEMPLATES_VAR = "QWEN_CHAT_TEMPLATES"  # a folder holding the files of TEMPLATES by those names

TRL = "trl==1.16.0"  # a release whose copies match the pins (checked at every fetch, so a wrong pin fails loudly)
SOURCE = {"qwen3_5_0.8b_2b.jinja": "trl/chat_templates/qwen3_5_nothink.jinja",  # our name -> path in the wheel
          "qwen3_5_4b_and_up.jinja": "trl/chat_templates/qwen3_5_think.jinja"}


def key():
    """What a cache of the templates is keyed on: the digests the tests pin, so a new pin fetches again."""
    return "chat-templates-" + "-".join(TEMPLATES[name][0][:16] for name in sorted(TEMPLATES))


def download(folder):
    """The pinned trl wheel, downloaded by pip into `folder`, without its dependencies."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                    "--dest", str(folder), TRL], check=True)
    return next(Path(folder).glob("trl-*.whl"))


def extract(wheel, folder):
    """Write each template of the wheel into `folder` under the name the tests look for, after checking its
    sha256 against the pin. Nothing is written unless both match."""
    with zipfile.ZipFile(wheel) as z:
        texts = {name: z.read(SOURCE[name]) for name in sorted(TEMPLATES)}
    for name, data in texts.items():
        got = hashlib.sha256(data).hexdigest()
        if got != TEMPLATES[name][0]:
            raise SystemExit(f"error: {SOURCE[name]} in {Path(wheel).name} has sha256 {got}, not the pinned "
                             f"{TEMPLATES[name][0]} of {name} (TEMPLATES): nothing written")
    Path(folder).mkdir(parents=True, exist_ok=True)
    for name, data in texts.items():
        (Path(folder) / name).write_bytes(data)
    return sorted(texts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", help="where to write the two templates")
    parser.add_argument("--wheel", help="a trl wheel already downloaded (default: download " + TRL + ")")
    parser.add_argument("--key", action="store_true", help="print the cache key (the pinned digests) and stop")
    args = parser.parse_args(argv)
    if args.key:
        print(key())
        return
    if not args.folder:
        parser.error("name the folder to write the templates into (or --key)")
    with tempfile.TemporaryDirectory() as tmp:
        names = extract(args.wheel or download(tmp), args.folder)
    print(f"wrote {', '.join(names)} into {args.folder} (sha256 as pinned)")


if __name__ == "__main__":
    main()
