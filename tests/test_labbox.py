"""The lab box every lesson renders: VRAM need, cost and commands from the registry."""

from __future__ import annotations

import dataclasses
import math

import pytest

from infercourse import course, labbox, labs


def test_vram_needed_for_the_phases_lab():
    # 15,231,233,024 B weights + 4,224 tokens * 57,344 B + 2 GiB reserve = 17,620,937,728 B; / 0.92
    assert labbox.vram_needed_bytes(4224) == pytest.approx(19_153_193_182.6, abs=1)


def test_vram_needed_counts_a_draft_model_s_weights_and_kv_cache():
    # Qwen2.5-0.5B (config.json: hidden 896, 24 layers, 14 heads, 2 KV heads of 64, intermediate 4,864,
    # vocabulary 151,936, tied embeddings): embedding 151,936 x 896 = 136,134,656; a layer: q 896 x 896 + 896,
    # k and v 896 x 128 + 128 each, o 896 x 896, MLP 3 x 896 x 4,864, two norms of 896 = 14,912,384; x 24 =
    # 357,897,216; final norm 896: 494,032,768 parameters (the model card's 0.49B) = 988,065,536 B in BF16.
    # KV per token: 2 x 24 x 2 x 64 x 2 B = 12,288 B. For 4,224 tokens: (988,065,536 + 51,904,512) / 0.92.
    extra = labbox.vram_needed_bytes(4224, draft_model="Qwen/Qwen2.5-0.5B-Instruct") - labbox.vram_needed_bytes(4224)
    assert extra == pytest.approx(1_039_970_048 / 0.92, abs=1)
    box = labbox.lab_box("spec_decode.py")
    assert "its draft model Qwen/Qwen2.5-0.5B-Instruct's (0.9 GiB)" in box  # 988,065,536 B / 2^30 = 0.92 GiB
    assert "in both models' layers" in box


def test_box_names_the_install_the_driver_the_hub_workaround_and_the_receipt_folder():
    box = labbox.lab_box("phases.py")
    # one line, collapsed: the lab, its cards, its VRAM, its time and price; the details open on a click
    title = box.splitlines()[0]
    minutes = labbox.lab_minutes("phases")["total"]
    assert title == (
        f'??? example "GPU lab: `snippets/labs/phases.py` · 1 × RTX 4090 · 18.1 GiB of VRAM · '
        f'about {math.ceil(minutes)} min, ¥{minutes / 60 * 2.0:.2f}"'
    )
    assert "pip install -r requirements-labs-gpu.lock" in box and "run_labs.py --check" in box
    assert "driver is 580 or newer" in box and "CUDA 12" not in box
    assert "VLLM_USE_MODELSCOPE=True" in box
    assert "--receipt receipts/rtx-4090/phases.json" in box  # the folder labs.machine_slug gives an RTX 4090
    # peak KV = the lab's MAX_MODEL_LEN, 8,192 tokens: (15,231,233,024 + 8,192 x 57,344 + 2 GiB) / 0.92
    # = 17,848,484,864 / 0.92 = 19,400,527,026 B = 18.07 GiB
    assert "18.1 GiB" in box and "8,192 tokens" in box and "fits an" in box
    # the route without a GPU, on every lab's box, with its own lab's name (issue 29 item 5)
    for lesson in course.live_lessons():
        if lesson.get("lab"):
            assert f"`make labs-cpu LAB={lesson['lab']}`" in labbox.lab_box(f"{lesson['lab']}.py"), lesson["lab"]


def test_lab_minutes_from_the_lab_s_own_work():
    m = labbox.lab_minutes("phases")
    # download 15,231,233,024 B / 50e6 B/s = 304.6 s = 5.077 min; one engine start, 2 min
    assert m["download"] == pytest.approx(15_231_233_024 / 50e6 / 60)
    assert m["engines"] == 2
    # 5 repeats x (32 + 128 + 512 + 128 + 128) = 4,640 steps + 3 warm-up prompts x 8 = 4,664 steps;
    # each at the decode-step floor at 2,048 tokens: (14,141,238,272 + 57,344 x 2,048) B / 1008e9 B/s
    # = 14.1454 ms (memory-bound), / 0.7 = 20.208 ms: 94.25 s = 1.571 min
    assert m["decode"] == pytest.approx(4664 * (14_141_238_272 + 57_344 * 2048) / 1008e9 / 0.7 / 60, rel=1e-3)
    assert m["run"] == pytest.approx(m["engines"] + m["decode"])  # phases has no request arrivals
    assert m["total"] == pytest.approx(m["download"] + m["engines"] + m["decode"])
    assert labbox.lab_minutes("kv_capacity")["engines"] == 6  # capacity, fp8, over-ask


def test_time_estimate_counts_the_download_once():
    text = labbox.time_estimate(["phases", "weights"])
    # 2 + 1.571 and 2 + 0 min, plus 5.077 min of download: 10.6 min
    assert "download" in text and text.rstrip().endswith("10.6 min")


def test_a_spec_without_work_is_named_not_an_attribute_error(monkeypatch):
    monkeypatch.setitem(labs.SPECS, "phases", dataclasses.replace(labs.spec("phases"), work=None))
    for call in (lambda: labbox.lab_minutes("phases"), lambda: labbox.lab_box("phases.py")):
        with pytest.raises(ValueError, match=r"lab 'phases''s spec sets no work: give its LabSpec a work=LabWork"):
            call()


def test_every_cpu_run_but_one_starts_eager():
    """scripts/run_labs.py --cpu adds --enforce-eager to every lab's CPU arguments but the one whose spec keeps
    it compiled (phases: torch.compile stays covered by the CPU tests); a GPU run adds nothing."""

    from conftest import load_script

    run_labs = load_script("run_labs")
    eager = {lab: "--enforce-eager" in run_labs.cpu_args(lab)[1] for lab in labs.wired()}
    compiled = [lab for lab, is_eager in eager.items() if not is_eager]
    assert compiled == ["phases"], (
        f"CPU runs without --enforce-eager: {compiled}; only phases may keep its CPU run compiled (its spec's "
        "cpu_compiled=True): unset cpu_compiled in the others' specs, or restore the --enforce-eager that "
        "scripts/run_labs.py's cpu_args adds"
    )
    assert all(run_labs.cpu_args(lab)[1].count("--enforce-eager") <= 1 for lab in labs.wired())


def test_every_runner_line_in_a_lab_box_uses_the_runner_s_own_flags():
    """A lab box's ``python scripts/run_labs.py ...`` lines (the preflight, the fetch) use flags ``run_labs.py``
    has, and name a lab that exists."""
    import shlex
    import subprocess
    import sys

    from conftest import ROOT

    help_text = subprocess.run(
        [sys.executable, "scripts/run_labs.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    ).stdout
    for lab in labs.wired():
        lines = [line.strip() for line in labbox.lab_box(f"{lab}.py").splitlines()]
        runner = [shlex.split(line, comments=True) for line in lines if line.startswith("python scripts/run_labs.py")]
        assert len(runner) == 2, (lab, runner)  # --check, then --fetch --lab <lab>
        for words in runner:
            assert all(w in help_text for w in words[2:] if w.startswith("--")), (lab, words)
        assert runner[1][2:] == ["--fetch", "--lab", lab]
    assert "--fecth" not in help_text  # the check can fail: a misspelt flag is not in the help
