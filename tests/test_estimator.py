"""Lesson 0A's estimator (snippets/lesson_0a/phase_intensity.py), imported as the page runs it."""

from __future__ import annotations

import pytest

from infercourse.snippets import load

pi = load("lesson_0a/phase_intensity.py")


def test_seed_values_reproduced_with_rounded_param_count():
    # The owner's draft printed these with N = 7.615e9 and kappa = 57,344 B.
    m = pi.Model(7_615_000_000, 57_344)
    assert [round(pi.prefill_intensity(m, s), 1) for s in (128, 1024, 8192)] == [127.9, 1020.1, 7946.9]
    assert [round(pi.decode_intensity(m, s), 2) for s in (128, 1024, 8192)] == [1.00, 1.00, 0.97]


def test_exact_param_count_against_hand_arithmetic():
    m = pi.Model(7_615_616_512, 57_344)
    # N*b = 15,231,233,024 B.
    # prefill S=8192: 2*N*8192 = 124,774,260,932,608 FLOPs; bytes 15,231,233,024 + 469,762,048 = 15,700,995,072
    assert pi.prefill_intensity(m, 8192) == pytest.approx(124_774_260_932_608 / 15_700_995_072, rel=1e-12)
    assert round(pi.prefill_intensity(m, 8192), 1) == 7946.9  # 7,946.90...
    # decode ctx=8192: 15,231,233,024 / 15,700,995,072 = 0.97008...
    assert pi.decode_intensity(m, 8192) == pytest.approx(0.970080, abs=1e-6)
    # the ratio is exactly S (same denominator)
    assert pi.prefill_intensity(m, 1024) / pi.decode_intensity(m, 1024) == pytest.approx(1024, rel=1e-12)


def test_ridge_points_against_hand_arithmetic():
    assert pi.ridge_point(165.2, 1008) == pytest.approx(163.888, abs=1e-3)  # 165.2e12 / 1.008e12
    assert pi.ridge_point(989, 4800) == pytest.approx(206.042, abs=1e-3)  # 989e12 / 4.8e12


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "128"])
@pytest.mark.parametrize("function, arg", [("prefill_intensity", "prompt_len"), ("decode_intensity", "context_len")])
def test_bad_lengths_name_the_argument(function, arg, bad):
    with pytest.raises(ValueError, match=arg):
        getattr(pi, function)(pi.Model(7_615_616_512, 57_344), bad)


@pytest.mark.parametrize(
    "field, kwargs",
    [
        ("params", dict(params=0, kv_bytes_per_token=57_344)),
        ("params", dict(params=-7, kv_bytes_per_token=57_344)),
        ("kv_bytes_per_token", dict(params=7, kv_bytes_per_token=0)),
        ("weight_bytes", dict(params=7, kv_bytes_per_token=1, weight_bytes=0)),
        ("weight_bytes", dict(params=7, kv_bytes_per_token=1, weight_bytes=-2)),
    ],
)
def test_bad_model_values_name_the_field(field, kwargs):
    with pytest.raises(ValueError, match=field):
        pi.Model(**kwargs)


def test_table_printed_as_markdown(capsys):
    pi.print_table(pi.Model(7_615_616_512, 57_344), lengths=(128,))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| tokens S |")
    assert lines[2] == "| 128 | 127.9 | 1.00 | 128 |"
