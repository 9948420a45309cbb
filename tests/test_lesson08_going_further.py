"""Lesson 8's optional part, "Going further: this is GPT-2": kept out of the core's minutes, its
GPT-2-layout checkpoint laid out as Hugging Face's GPT-2 lays one out, and its download opt-in."""

import json
from pathlib import Path

import pytest
import torch

from helpers.checks.transfer import foreign_checkpoint, gpt2_options_model
from helpers.course import estimated_minutes
from helpers.zoo.gpt import GPT, gpt2_state_dict
from helpers.zoo.huggingface import transformers_available

NOTEBOOK = (
    Path(__file__).resolve().parent.parent / "notebooks" / "08_embeddings_and_weight_tying.ipynb"
)


def _cell(kind, source, **meta):
    return {"cell_type": kind, "source": source, "metadata": meta}


def test_going_further_part_is_counted_apart_from_the_core():
    core = [_cell("markdown", "# Title\n\n" + "word " * 298), _cell("code", "x = 1")]
    further = [
        _cell("markdown", "## Going further: more\n\n" + "word " * 96),  # 100 words: 1 minute
        _cell("code", "y = 2"),
        _cell(
            "code",
            "def f():\n    ### BEGIN SOLUTION\n    ### END SOLUTION",
            nbgrader={"solution": True, "grade_id": "ex"},
            course={"minutes": 10},
        ),  # fmt: skip
    ]
    alone = estimated_minutes({"cells": core})
    both = estimated_minutes({"cells": core + further})
    assert both["total"] == alone["total"] == 3 + 1 and both["n_exercises"] == 0
    assert both["further"] == pytest.approx(1 + 2 + 10) and alone["further"] == 0


def test_lesson8_core_fits_a_sitting_and_its_going_further_part_is_there():
    minutes = estimated_minutes(NOTEBOOK)
    assert minutes["total"] <= 90 < minutes["total"] + minutes["further"]
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    heading = next(
        i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## Going further")
    )
    recap = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## Recap"))
    assert recap < heading  # the core path ends with its recap, the optional part follows
    ids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in cells[heading:]]
    assert "l8_ex4" in ids and "l8_ex4_check" in ids


def test_the_real_gpt2_cell_is_off_and_says_so():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    cell = next(c for c in cells if "LOAD_REAL_GPT2 =" in "".join(c["source"]))
    assert "LOAD_REAL_GPT2 = False" in "".join(cell["source"])
    said = "".join("".join(o.get("text", "")) for o in cell["outputs"])
    assert said.startswith("skipped: LOAD_REAL_GPT2 is False, nothing downloaded")


@pytest.mark.skipif(not transformers_available(), reason="transformers not installed")
def test_gpt2_state_dict_is_laid_out_as_hugging_faces_gpt2():
    import transformers as T

    gpt = GPT(block_size=12, vocab_size=31, n_layer=2, n_head=2, n_embd=16)
    ours = gpt2_state_dict(gpt)
    config = T.GPT2Config(vocab_size=31, n_positions=12, n_embd=16, n_layer=2, n_head=2)
    theirs = T.GPT2LMHeadModel(config).state_dict()
    assert {k: tuple(v.shape) for k, v in ours.items()} == {
        k: tuple(v.shape) for k, v in theirs.items()
    }
    loaded = T.GPT2LMHeadModel(config).eval()
    loaded.load_state_dict(ours)  # Hugging Face's GPT-2 reads it as its own: the same logits
    tokens = torch.randint(0, 31, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens).logits, gpt.eval()(tokens)[0], rtol=0, atol=1e-5)


def test_foreign_checkpoint_leaves_torch_random_state_and_fits_the_course_model():
    before = torch.random.get_rng_state()
    state, gpt = foreign_checkpoint(3, 29, 24, 2, 3, 10)
    assert torch.equal(torch.random.get_rng_state(), before)
    model = gpt2_options_model(state, 3)
    assert model.config.activation == "gelu_tanh" and model.tied
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in gpt.parameters())
