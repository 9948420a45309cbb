"""The benchmark's own figures (benchmarks/run.py): what its suite row's CPU columns measure."""

import re
import time
from pathlib import Path

import pytest

from benchmarks import run  # noqa: E402


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no /proc/stat on this system")
def test_machine_busy_cpu_counts_at_least_this_process_own_work():
    """The machine's busy CPU over an interval holds every process's, this one's included: it
    grows by at least the CPU this process spent (less one clock tick per field read)."""
    before, mine_before = run.machine_busy_cpu_s(), time.process_time()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    after, mine = run.machine_busy_cpu_s(), time.process_time() - mine_before
    assert after - before >= mine - 0.05, (after - before, mine)


def test_suite_row_gives_both_cpu_figures_and_the_busy_share():
    row = {"seconds": 100.0, "cpu_s": 50.0, "machine_busy_cpu_s": 190.0, "cores": 2}
    lines = run.render_suite({"suites": [{**row, "summary": "ok", "marker": None}]})
    # the share uses the cores of the machine measured, whatever machine renders the table
    assert "| 50 s | 190 s | 95 % | ok |" in lines[-1]
    old = {"seconds": 100.0, "cpu_s": 50.0, "summary": "ok"}  # a row stored before
    assert "not measured" in run.render_suite({"suites": [{**old, "marker": None}]})[-1]


def test_speed_reference_has_the_course_models_shape_and_parameter_count():
    """The side-by-side row compares like with like: the reference GPT and the course's
    ``Pretraining`` model at the benchmark's shape hold the same number of parameters."""
    from benchmarks import speed
    from helpers.params import count_parameters
    from helpers.pretrain import Corpus

    corpus = Corpus.from_text(val_tokens=256)
    s = speed.SHAPE
    ref = speed.ReferenceGPT(
        corpus.tokenizer.vocab_size, s["d_model"], s["n_layers"], s["n_heads"], s["block_size"]
    )
    course = speed._course_run(corpus, seed=0, eval_every=10**9).model
    assert count_parameters(ref) == count_parameters(course) > 0
    assert ref.head.weight is ref.tok.weight  # tied, as the course's
    tokens = corpus.train_ids[: 2 * (s["block_size"] + 1)].reshape(2, -1)
    assert abs(float(ref.loss(tokens)) - float(course.loss(tokens))) < 0.5  # both near ln V


def test_benchmarks_import_nothing_from_the_tests():
    import ast

    for path in (Path(__file__).resolve().parent.parent / "benchmarks").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                names = []
            assert not any(n.startswith(("test_", "tests", "_grading_notebooks")) for n in names), (
                path.name,
                names,
            )
        on_path = re.search(r"sys\.path\.insert\([^)]*tests", path.read_text())
        assert not on_path, f"{path.name} puts tests/ on sys.path"


def test_lessons_measured_alone_replace_their_rows_and_keep_the_others():
    old = {"date": "d0", "machine": "m0", "data": {"lessons": [{"lesson": "a"}, {"lesson": "b"}]}}
    new = {"date": "d1", "machine": "m1", "data": {"lessons": [{"lesson": "b", "seconds": 1.0}]}}
    merged = run.merge_lessons(old, new)
    assert merged["date"] == "d0"
    assert merged["data"]["lessons"] == [
        {"lesson": "a"},
        {"lesson": "b", "seconds": 1.0, "date": "d1"},
    ]


def test_lesson_9_row_reads_the_live_loss_and_word_share_the_notebook_printed():
    import nbformat

    from benchmarks.lessons import _live_run, render_lessons

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    printed = (
        "held-out loss: live run 2.250, longer run 1.518\n"
        "T = 1, 200 characters: live run 3 of 41 words are the text's,\n"  # not this one
        "T = 0.8, three samples pooled: live run 15 of 40 words are the text's"
    )
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    nb.cells.append(cell)
    live = _live_run("09_the_full_model.ipynb", nb)
    assert live == {"live_loss": 2.25, "live_words": [15, 40]}
    assert _live_run("08_embeddings.ipynb", nb) == {}
    row = {"lesson": "09_the_full_model.ipynb", "seconds": 20.0, "cpu_s": 19.0, "kernel_start_s": 1.0,
           "kernel_start_cpu_s": 1.0, "kernel_mb": 400.0, "cells": [], **live}  # fmt: skip
    text = "\n".join(render_lessons({"lessons": [row]}))
    assert "held-out loss 2.250 nats (target <= 2.1) **missed**" in text
    assert (
        "15 of 40 words of its three samples at T = 0.8 are the text's (38%, target >= one" in text
    )
    assert "one third) met" in text
