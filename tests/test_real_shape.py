"""The book built on a checkpoint with the real Qwen3.5-0.8B's shapes: the path the published edition takes (it is
built on the real model), proven where the real weights cannot be downloaded. The checkpoint is the synthetic one's
layout at the real widths (qwen/sizes.py REAL_TEXT_CONFIG and REAL_VISION_CONFIG, with the real tokenizer's
vocabulary), random weights, and nothing in it saying it is synthetic, so the chapters treat it as a real one:
chapters 3, 8 and 12 (the norms, the whole model, the quantized model) are executed on it and laid out by the engine.

It takes about 6 minutes and 11 GB of memory (chapter 12 at the real shapes), so it runs where the book is
published (the book's workflow runs it before building on the real model) or by hand:
    QWEN_REAL_SHAPE=1 python -m pytest --all tests/test_real_shape.py
"""
import json
import os

import pytest

from qwen import synthetic
from qwen.sizes import REAL_TEXT_CONFIG, REAL_VISION_CONFIG
from web import execute
from web.build import build_site, chapters

CHAPTERS = [3, 8, 12]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600), pytest.mark.skipif(
    os.environ.get("QWEN_REAL_SHAPE") != "1",
    reason="the book on a checkpoint with the real 0.8B's shapes takes about 6 minutes and 11 GB: it runs where the "
           "book is published, or by hand (QWEN_REAL_SHAPE=1 python -m pytest --all tests/test_real_shape.py)")]


@pytest.fixture(scope="module")
def real_shape(tmp_path_factory):
    """The synthetic checkpoint's layout at the real 0.8B's widths, its marker removed: a 'real' checkpoint."""
    folder = tmp_path_factory.mktemp("real-shape") / "Qwen3.5-0.8B-shapes"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(synthetic, "TEXT", dict(synthetic.TEXT, **REAL_TEXT_CONFIG))
        patch.setattr(synthetic, "VISION", dict(model_type="qwen3_5", deepstack_visual_indexes=[],
                                                **REAL_VISION_CONFIG))
        synthetic.generate(folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop(synthetic.MARKER)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    assert not synthetic.is_synthetic(folder)
    return folder


def test_chapters_3_8_and_12_build_on_the_real_shapes(real_shape, tmp_path):
    kernels = execute.kernel_spec(tmp_path / "kernels", real_shape, "en")
    said = []
    editions = execute.executed({"en": (chapters("en", CHAPTERS), kernels)}, str(real_shape),
                                cache=tmp_path / "cache", say=lambda line, **_: said.append(line), jobs=1)
    printed = {stem: "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
               for stem, nb in editions["en"].items()}
    assert [stem[:4] for stem in printed] == ["ch03", "ch08", "ch12"]
    for stem, text in printed.items():  # a real checkpoint: no word of synthetic weights, the real widths
        assert "SYNTHETIC" not in text and text.strip(), stem
    index = build_site(editions, str(real_shape), tmp_path / "site", tmp_path / "sphinx",
                       say=lambda line, **_: said.append(line))
    warnings = [line for line in said if "WARNING" in line or "ERROR" in line]
    assert warnings == []
    for stem in printed:
        page = (index.parent / "chapters" / f"{stem}.html").read_text(encoding="utf-8")
        assert "Synthetic weights" not in page and "<figure" in page, stem
