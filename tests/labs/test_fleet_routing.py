"""Lab fleet_routing (lesson 8A): the spec's claims and prediction, and the lab's bad input, on receipts worked by
hand.

The workload by hand: 3 prefixes x 4 rounds over 2 replicas, sent round 0 of every prefix, then round 1, ...
Round robin: request k goes to replica k mod 2, so prefix g's requests go to (g + 3r) mod 2: both replicas, each
computing the prefix once; cached tokens per prefix 0, 0, c, c. Affinity: each prefix on one replica: 0, c, c, c.
With 256-token prefixes and 16-token suffixes in blocks of 128, c = floor(min(256, 271) / 128) x 128 = 256.
"""

from __future__ import annotations

import pytest

from conftest import claims_passed, lab_refusal, make_receipt
from infercourse import labs

SPEC = labs.spec("fleet_routing")
SETTINGS = {"replicas": 2, "groups": 3, "rounds": 4, "prefix_tokens": 256, "suffix_tokens": 16, "block_size": 128}
HOME = {0: 0, 1: 1, 2: 1}  # where the hash put each prefix


def _rows(miss_ms: float = 20.0, hit_ms: float = 12.0) -> list[dict]:
    rows, seen = [], set()
    for policy in ("round_robin", "consistent_hash"):
        for k in range(12):
            rnd, group = divmod(k, 3)
            replica = k % 2 if policy == "round_robin" else HOME[group]
            cached = 256 if (policy, group, replica) in seen else 0
            seen.add((policy, group, replica))
            rows.append(
                {
                    "policy": policy,
                    "round": rnd,
                    "group": group,
                    "replica": replica,
                    "prompt_tokens": 272,
                    "cached_tokens": cached,
                    "ttft_ms": hit_ms if cached else miss_ms,
                }
            )
    return rows


def _receipt(rows=None, kind="cpu") -> dict:
    return make_receipt(
        "fleet_routing",
        _rows() if rows is None else rows,
        SPEC.units,
        kind=kind,
        settings=SETTINGS,
    )


def test_a_receipt_worked_by_hand_passes_every_exact_claim():
    receipt = _receipt()
    labs.validate_receipt(receipt)
    rows = receipt["results"]
    assert sum(r["cached_tokens"] for r in rows if r["policy"] == "round_robin") == 3 * 2 * 256  # 1,536
    assert sum(r["cached_tokens"] for r in rows if r["policy"] == "consistent_hash") == 3 * 3 * 256  # 2,304
    assert claims_passed(receipt) == {
        "every_request_once": True,
        "cached_tokens_exact": True,
        "round_robin_cycles": True,
        "affinity_keeps_prefix": True,
        "fleet_hits_exact": True,
        "hit_ttft_lower": None,  # timing: not judged on a CPU receipt
    }


def test_a_hit_on_a_replica_that_never_saw_the_prefix_fails():
    rows = _rows()
    rows[1]["cached_tokens"] = 256  # prefix 1's first request, on replica 1: must be cold
    claims = claims_passed(_receipt(rows))
    assert claims["cached_tokens_exact"] is False and claims["fleet_hits_exact"] is False


def test_a_round_robin_that_skips_a_replica_fails():
    rows = _rows()
    rows[5]["replica"] = rows[4]["replica"]
    assert claims_passed(_receipt(rows))["round_robin_cycles"] is False


def test_affinity_that_moves_a_prefix_fails():
    rows = _rows()
    rows[12 + 9]["replica"] = 1 - rows[12 + 9]["replica"]  # prefix 0's last request elsewhere
    assert claims_passed(_receipt(rows))["affinity_keeps_prefix"] is False


def test_a_lost_request_or_a_wrong_prompt_fails():
    assert claims_passed(_receipt(_rows()[:-1]))["every_request_once"] is False
    rows = _rows()
    rows[0]["prompt_tokens"] = 271
    assert claims_passed(_receipt(rows))["every_request_once"] is False


def test_hit_ttft_is_judged_on_gpu_receipts():
    assert claims_passed(_receipt(kind="gpu"))["hit_ttft_lower"] is True
    assert claims_passed(_receipt(_rows(miss_ms=10.0, hit_ms=12.0), kind="gpu"))["hit_ttft_lower"] is False


def test_prediction_by_hand():
    """Defaults: 2,048-token prefixes, 64-token questions, blocks of 16: c = 2,048; 3 x 4 x 2,112 = 25,344 prompt
    tokens; round robin 3 x 2 x 2,048 = 12,288 (48.5 %), affinity 3 x 3 x 2,048 = 18,432 (72.7 %)."""
    text = SPEC.prediction()
    assert "| round_robin | 2 | 12,288 | 48.5 % |" in text
    assert "| consistent_hash | 1 | 18,432 | 72.7 % |" in text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--replicas", "1"], "a router needs at least 2 replicas"),
        (["--prefix-tokens", "4096"], "a request needs 4168 tokens but --max-model-len is 4096"),
        (["--gpu-memory-utilization", "0.5"], "exceed the card; pass --gpu-memory-utilization 0.45 or less"),
        (["--policies", "random"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_before_anything_starts(args, expected):
    assert expected in lab_refusal("fleet_routing", *args)


def test_the_lab_box_counts_both_replicas_on_their_share_of_the_card():
    """Each replica: Qwen2.5-0.5B's 2 x 494,032,768 = 988,065,536 B of weights, 7,008 tokens of cache at 24 layers
    x 2 x 2 heads x 64 x 2 B = 12,288 B (86,114,304 B) and the 2 GiB reserve: 3,221,663,488 B, over its 0.4 of the
    card: 8,054,158,720 B = 7.5 GiB (one engine at vLLM's 0.92 would need 3.3)."""
    from infercourse import labbox

    box = labbox.lab_box("fleet_routing.py")
    assert "· 7.5 GiB of VRAM ·" in box
    assert "2 replicas run side by side" in box and "`--gpu-memory-utilization` each gets of\n      0.4" in box
    assert labbox.vram_needed_bytes(7008, "Qwen/Qwen2.5-0.5B-Instruct", utilization=0.4) == pytest.approx(8_054_158_720)


def test_the_notebook_exercises_by_hand():
    """3 prefixes, 4 rounds, 4 replicas (3 and 4 share no factor): round robin sends each prefix to min(4, 4) = 4
    replicas, all cold, so G (n - m) c = 3 x 0 x 2,048 = 0 hits; consistent hashing, one replica per prefix:
    3 x (4 - 1) x 2,048 = 18,432 (c = 2,048: the prefix is whole blocks, and the prompt 2,048 + 64 - 1 is longer)."""
    replicas, round_robin, hashed = (e.answer() for e in labs.spec("fleet_routing").exercises)
    assert (replicas, round_robin, hashed) == (4, 0, 18_432)


def test_the_notebook_compares_cached_tokens_with_lesson_5a_s_rule():
    """The notebook's first panel: each request's cached tokens beside the rule on the replica it reached, exact."""
    receipt = _receipt()
    found = labs.compared(receipt)
    # round robin, prefix 0: replicas 0, 1, 0, 1 (requests 0, 3, 6, 9): 0, 0, c, c with c = 2 x 128 = 256;
    # affinity, prefix 0 on replica 0 (requests 12, 15, 18, 21): 0, c, c, c
    assert [found[k].predicted for k in (0, 3, 6, 9, 12, 15, 18, 21)] == [0, 0, 256, 256, 0, 256, 256, 256]
    assert all(c.measured == c.predicted and c.kind == "exact" for c in found) and len(found) == 24
    receipt["results"][3]["cached_tokens"] = 256  # a hit on replica 1, which never saw prefix 0
    assert labs.compared(receipt)[3].measured == 256 and labs.compared(receipt)[3].predicted == 0
    assert "NOT as predicted" in labs.report(receipt)[1]
