"""The lab box every lesson renders: VRAM need, cost and commands from the registry."""

from __future__ import annotations

import pytest

from infercourse import labbox


def test_vram_needed_for_the_phases_lab():
    # 15,231,233,024 B weights + 4,224 tokens * 57,344 B + 2 GiB reserve = 17,620,937,728 B; / 0.92
    assert labbox.vram_needed_bytes(4224) == pytest.approx(19_153_193_182.6, abs=1)


def test_box_names_the_install_the_hub_workaround_and_the_receipt_folder():
    box = labbox.lab_box("phases.py", 4224, 1)
    assert box.startswith('!!! example "GPU lab: `snippets/labs/phases.py`"')
    assert "pip install -r requirements-labs-gpu.txt" in box
    assert "VLLM_USE_MODELSCOPE=True" in box
    assert "--receipt receipts/rtx-4090/phases.json" in box  # the folder labs.machine_slug gives an RTX 4090
    assert "17.8 GiB" in box and "fits an" in box  # 19,153,193,182.6 B / 2^30 = 17.84 GiB


@pytest.mark.parametrize("args", [(0, 1), (-5, 1), (4224, 0), (4224, -1)])
def test_bad_sizes_are_refused(args):
    with pytest.raises(ValueError):
        labbox.lab_box("phases.py", *args)
