"""Lab chunked_prefill (lesson 4B): its spec's claims, prediction and bad input, on receipts worked by hand.

The hand arithmetic of the model, the card and the floors is in tests/lessons/test_4b.py's docstring.
"""

from __future__ import annotations

import json

import pytest

from conftest import claims_passed, make_receipt
from infercourse import figures, labs, snippets
from infercourse.labs import chunked_prefill as cp

SPEC = labs.spec("chunked_prefill")
SETTINGS = {
    "decoder_prompt_tokens": 8,
    "decode_tokens": 16,
    "long_output_tokens": 2,
    "prefill_output_tokens": 1,
    "warm_steps": 4,
}


def _row(chunk="64", budget=64, decoders=0, prompt=310, step=5, dec=(0, 0), exact=None, hist=None, gap=0.0):
    """A steps row of the CPU run (budget 64, decoders of 8 + 16 tokens, prompts of 2 output tokens):
    histogram tokens = D * (8 + 16) + P + 2."""
    requests = decoders + 1
    return {
        "part": "steps",
        "chunk": chunk,
        "max_num_batched_tokens": budget,
        "decoders": decoders,
        "prompt_tokens": prompt,
        "first_token_step": step,
        "decoder_tokens_min": dec[0],
        "decoder_tokens_max": dec[1],
        "requests": requests,
        "requests_exact": requests if exact is None else exact,
        "histogram_tokens": decoders * 24 + prompt + 2 if hist is None else hist,
        "max_gap_ms": gap,
        "ttft_ms": 10.0,
        "ttft_cold_ms": None,
        "long_sent_ms": None,
        "decoder_token_ms": None,
        "block_size": None,
        "kv_bytes_per_token": None,
        "kv_bytes_written": None,
        "kv_bytes_consumer": None,
        "cached_tokens": None,
        "external_hits": None,
    }


def _serve_row(chunk="64", budget=64, exact=5, hist=408, gap=30.0):
    """A serve row of the CPU run: 4 streaming decoders of 8 + 16 tokens and the 310-token prompt with 2:
    5 requests, histogram 4 * (8 + 16) + 310 + 2 = 408 tokens."""
    return {
        **_row(chunk, budget, 4, 310, None, (None, None), exact, hist, gap),
        "part": "serve",
        "long_sent_ms": 100.0,
        "decoder_token_ms": [[50.0, 75.0, 100.0, 130.0, 130.0]] * 4,
    }


def _pd_row(written=262_144, consumer=0, cached=256, hits=256, hist=347):
    """The pd row of the CPU run: P = 300, blocks of 128, kappa = 2 * 2 layers * 2 KV heads * 64 * 2 B = 1,024;
    the producer stores floor(299 / 128) * 128 = 256 tokens = 262,144 B, the consumer none and loads
    floor(298 / 128) * 128 = 256; histogram: producer 300 + 1, consumer 300 - 256 + 2 = 46: 347."""
    return {
        **_row("512", 512, 0, 300, None, (None, None), hist=hist),
        "part": "pd",
        "requests": 2,
        "requests_exact": 2,
        "max_gap_ms": None,
        "ttft_cold_ms": 12.0,
        "block_size": 128,
        "kv_bytes_per_token": 1024,
        "kv_bytes_written": written,
        "kv_bytes_consumer": consumer,
        "cached_tokens": cached,
        "external_hits": hits,
    }


def _receipt(rows=None, kind="cpu") -> dict:
    rows = rows or [
        _row(prompt=64, step=1),  # ceil(64 / 64)
        _row(prompt=65, step=2),  # ceil(65 / 64)
        _row(prompt=310, step=5),  # ceil(310 / 64)
        _row(decoders=4, prompt=310, step=6, dec=(6, 6)),  # ceil(310 / 60)
        _serve_row(),
        _serve_row("off", 512),
        _pd_row(),
    ]
    return make_receipt(
        "chunked_prefill",
        rows,
        SPEC.units,
        kind=kind,
        settings=SETTINGS,
    )


def _verdict_with(index: int, row: dict, claim: str) -> bool | None:
    """``claim``'s verdict on :func:`_receipt`'s hand-worked receipt with row ``index`` replaced by ``row``."""
    rows = _receipt()["results"]
    rows[index] = row
    return claims_passed(_receipt(rows))[claim]


def test_the_cpu_run_checks_what_the_receipt_worked_by_hand_holds():
    receipt = _receipt()
    labs.validate_receipt(receipt)
    assert claims_passed(receipt) == {
        "first_token_steps_exact": True,
        "decoders_never_stall": True,
        "requests_exact": True,
        "histogram_tokens_exact": True,
        "connector_bytes_exact": True,
        "chunking_shortens_the_gap": None,  # timing: not judged on a CPU receipt
        "unchunked_gap_above_floor": None,
    }


def test_the_cpu_arguments_give_the_rows_worked_above():
    args = dict(zip(SPEC.cpu_args[::2], SPEC.cpu_args[1::2], strict=True))
    assert args["--chunks"] == "64" and args["--serve-chunks"] == "64" and "--parts" not in args  # all three
    assert args["--alone"] == "64,65,310" and args["--long-prompt"] == "310"
    assert (args["--decoders"], args["--decoder-prompt"], args["--decode-tokens"], args["--pd-prompt"]) == (
        "4",
        "8",
        "16",
        "300",
    )


def test_the_notebook_compares_the_first_token_step_with_the_lesson_s_count():
    """The notebook's first panel: each steps row's first-token step beside ceil(P / (C - D)), exact; the serve and
    pd rows count no steps and are not compared."""
    receipt = _receipt()
    found = labs.compared(receipt)
    # C = 64: ceil(64 / 64) = 1, ceil(65 / 64) = 2, ceil(310 / 64) = 5; beside D = 4 decoders ceil(310 / 60) = 6
    assert [(c.row, c.quantity, c.measured, c.predicted, c.kind) for c in found] == [
        (0, "first-token step", 1, 1, "exact"),
        (1, "first-token step", 2, 2, "exact"),
        (2, "first-token step", 5, 5, "exact"),
        (3, "first-token step", 6, 6, "exact"),
    ]
    receipt["results"][3]["first_token_step"] = 5  # the prompt given the whole budget beside the decoders
    assert labs.compared(receipt)[3].ratio == 5 / 6
    assert "NOT as predicted" in labs.report(receipt)[1]


def test_ignoring_the_decoders_in_the_budget_fails():
    """ceil(310 / 64) = 5 would mean the prompt got the whole budget beside 4 decoders: steps over 64 tokens."""
    assert _verdict_with(3, _row(decoders=4, prompt=310, step=5, dec=(5, 5)), "first_token_steps_exact") is False


def test_a_stalled_decoder_fails():
    assert _verdict_with(3, _row(decoders=4, prompt=310, step=6, dec=(5, 6)), "decoders_never_stall") is False


def test_a_request_short_of_its_tokens_fails():
    assert _verdict_with(0, _row(prompt=64, step=1, exact=0), "requests_exact") is False
    # one stream short of its tokens (or the long prompt's first)
    assert _verdict_with(5, _serve_row("off", 512, exact=4), "requests_exact") is False


def test_histogram_off_by_one_token_fails():
    assert _verdict_with(2, _row(prompt=310, step=5, hist=311), "histogram_tokens_exact") is False
    assert _verdict_with(4, _serve_row(hist=407), "histogram_tokens_exact") is False
    # the old single instance: two requests of 2 tokens
    assert _verdict_with(6, _pd_row(hist=2 * 302 - 256), "histogram_tokens_exact") is False


def test_connector_bytes_not_block_rounded_fail():
    """P * kappa = 300 * 1,024 = 307,200 B is not what ExampleConnector writes (whole blocks only)."""
    assert _verdict_with(6, _pd_row(written=307_200), "connector_bytes_exact") is False
    assert _verdict_with(6, _pd_row(cached=300, hits=300), "connector_bytes_exact") is False
    # the consumer stored the prompt again: it found no hit
    assert _verdict_with(6, _pd_row(consumer=262_144), "connector_bytes_exact") is False


def test_decoder_gaps_by_hand():
    """Tokens at 50, 75, 100, 130, 130 ms, the long prompt sent at 100: gaps 25, 25, 30, 0 ending at
    -25, 0, 30, 30 ms after the send (the last two tokens came in one event)."""
    assert cp.decoder_gaps(_serve_row()) == [(-25.0, 25.0), (0.0, 25.0), (30.0, 30.0), (30.0, 0.0)] * 4


def test_gap_claims_are_judged_on_gpu_receipts():
    rows = [
        _row("2048", 2048, 16, 16_384, 9, (9, 9), gap=250.0),
        _row("off", 20_480, 16, 16_384, 1, (1, 1), gap=1700.0),
        {**_serve_row("2048", 2048, 17, gap=260.0), "decoders": 16, "prompt_tokens": 16_384},
        {**_serve_row("off", 20_480, 17, gap=1750.0), "decoders": 16, "prompt_tokens": 16_384},
    ]
    for r in rows:
        r["histogram_tokens"] = 16 * 24 + 16_384 + 2
    receipt = _receipt(rows, "gpu")
    assert claims_passed(receipt)["chunking_shortens_the_gap"] is True
    assert claims_passed(receipt)["unchunked_gap_above_floor"] is True  # 1,700 and 1,750 >= 1,620.5 ms
    rows[3]["max_gap_ms"] = 200.0  # the server's unchunked gap below its chunked one and the 1,620.5 ms floor
    receipt = _receipt(rows, "gpu")
    assert claims_passed(receipt)["chunking_shortens_the_gap"] is False
    assert claims_passed(receipt)["unchunked_gap_above_floor"] is False


def test_prediction_counts_steps_beside_the_decoders():
    text = SPEC.prediction()
    assert "| 512 | 34 |" in text  # ceil(16,384 / 496) = 34
    assert "| 2048 | 9 |" in text  # ceil(16,384 / 2,032) = 9
    assert "| off | 1 | 1,620.5 | 1,620.5 |" in text
    # pd: 8,000 tokens, blocks of 16: floor(7,999 / 16) * 16 = 7,984 stored, * 57,344 = 457,834,496 B
    assert "stores 7,984 tokens, 457,834,496 B; the consumer writes nothing and loads 7,984" in text


def _refusal(capsys, *args: str) -> str:
    lab = snippets.load("labs/chunked_prefill.py")  # imports without vLLM
    with pytest.raises(SystemExit) as exit_:
        lab.main(["--model", "Qwen/Qwen2.5-7B-Instruct", *args])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err


def test_the_lab_refuses_bad_settings_before_any_engine(capsys):
    assert "leaves no room" in _refusal(capsys, "--chunks", "16", "--decoders", "16")
    # chunk 512 beside 16 decoders of 128: ceil(2,048 / 496) = 5 steps of their prefill + 4 warm steps
    # + ceil(16,384 / 496) = 34 steps of the long prefill + 2 = 45 tokens at least
    assert "pass 45 or more" in _refusal(capsys, "--chunks", "512", "--decode-tokens", "44")
    assert "pass 45 or more" in _refusal(capsys, "--parts", "serve", "--serve-chunks", "512", "--decode-tokens", "44")
    assert "--parts" in _refusal(capsys, "--parts", "steps,gaps")
    assert "--serve-chunks: 'pd'" in _refusal(capsys, "--serve-chunks", "64,pd")
    assert "--pd-prompt" in _refusal(capsys, "--parts", "pd", "--pd-prompt", "2")


def test_the_gap_figure_draws_a_gpu_receipt_beside_the_prediction(tmp_path):
    """No receipt: the prediction alone. A GPU receipt with the page's scene (16 decoders, 16,384 tokens):
    its serve rows become dots, and the text alternative gives their longest gaps."""
    from infercourse.pages import lesson_4b

    assert lesson_4b.gpu_receipt(tmp_path) is None
    assert "prediction alone" in lesson_4b._timeline_alt(None)
    rows = [
        {**_serve_row(c, b, 17, gap=g), "decoders": 16, "prompt_tokens": 16_384}
        for c, b, g in (("512", 512, 70.0), ("2048", 2048, 260.0), ("off", 20_480, 1750.0))
    ]
    (tmp_path / "rtx-4090").mkdir()
    (tmp_path / "rtx-4090" / "chunked_prefill.json").write_text(json.dumps(_receipt(rows, "gpu")))
    receipt = lesson_4b.gpu_receipt(tmp_path)
    assert receipt is not None and receipt["machine"]["name"] == "NVIDIA GeForce RTX 4090"
    alt = lesson_4b._timeline_alt(receipt)
    assert "Dots: every gap" in alt and "off 1,750.0 ms; C = 2,048 260.0 ms; C = 512 70.0 ms" in alt
    svg = figures.plot_svg(lambda ax: lesson_4b._timeline_plot(ax, receipt), salt="test")
    assert svg.count("measured") == 3 and svg.count("predicted") == 3
    assert "predicted" not in figures.plot_svg(lambda ax: lesson_4b._timeline_plot(ax, None), salt="test")


def test_the_notebook_exercises_by_hand():
    """2,000 tokens beside 16 decoders at 512 per step: ceil(2,000 / 496) = ceil(4.03) = 5 steps. 16,384 tokens in
    chunks of 2,048 on the RTX 4090: the last chunk (14,336 cached) is compute-bound, matmuls 13,051,243,520 x
    2,048 + 1,089,994,752 = 26,730,036,723,712 FLOP (tests/labs/test_phases.py's 2 (M - H) and 2 H), attention
    401,408 x (14,337 + ... + 16,384 = 2,048 x 30,721 / 2 = 31,458,304) FLOP, at 165.2 TFLOP/s: 238.24 ms.
    320 tokens: floor(319 / 16) x 16 = 19 x 16 = 304 (not 320: the last token is computed again)."""
    steps, longest_ms, stored = (e.answer() for e in labs.spec("chunked_prefill").exercises)
    assert (steps, stored) == (5, 304)
    flops = 26_730_036_723_712 + 401_408 * 31_458_304
    assert longest_ms == pytest.approx(flops / 165.2e12 * 1e3, rel=1e-9)
