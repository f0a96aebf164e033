"""Receipt envelope and per-lab specs, GPUs and floors, the lesson's expected output and the checker script.

Every number below is worked by hand next to it, from Qwen2.5-7B-Instruct's config.json and the registry's
datasheet figures: N = 7,615,616,512 parameters; embedding = lm_head = H = 152,064 x 3,584 = 544,997,376 (untied);
matmul parameters M = N - embedding = 7,070,619,136, so M*b = 14,141,238,272 B at b = 2 (bf16);
kappa = 57,344 B/token; attention FLOPs per query token per context token = 4*L*h*d_h =
4*28*28*128 = 401,408. RTX 4090: 1008 GB/s, 165.2 TFLOP/s (BF16 dense, FP32 accumulate).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import types
from pathlib import Path

import pytest

from conftest import load_script, phases_receipt
from infercourse import labs, snippets
from infercourse.registry import gpu

ROOT = Path(__file__).resolve().parents[1]


def test_a_well_formed_receipt_validates():
    labs.validate_receipt(phases_receipt())
    labs.validate_receipt(phases_receipt(kind="cpu"))


@pytest.mark.parametrize(
    "break_it, message",
    [
        (lambda r: r.pop("machine"), "missing 'machine'"),
        (lambda r: r["machine"].update(kind="tpu"), "kind must be 'gpu' or 'cpu'"),
        (lambda r: r["machine"].update(kind=["gpu"]), "kind must be 'gpu' or 'cpu'"),  # was a TypeError (unhashable)
        (lambda r: r["machine"].pop("driver"), "machine: missing 'driver'"),
        (lambda r: r["units"].update(ttft_ms="s"), "'ttft_ms' must be 'ms'"),
        (lambda r: r["results"][0].update(tpot_ms=math.nan), "not a finite non-negative number"),
        (lambda r: r["results"][1].pop("decode_s"), "results[1]: missing 'decode_s'"),
        (lambda r: r.update(date_utc="30/11/2026"), "is not YYYY-MM-DDTHH:MM:SSZ"),
        (lambda r: r["versions"].pop("vllm"), "versions: missing 'vllm'"),
        (lambda r: r.update(results=[]), "results is empty"),
        (lambda r: r.update(max_model_len="8192"), "'max_model_len' is str"),
        (lambda r: r["units"].pop("engine_start_s"), "'engine_start_s' must be 's'"),
        (lambda r: r["units"].update(bogus="ms"), "'bogus' is not a key of a phases row"),
        (lambda r: r["results"][2].update(itl_ms=3.0), "results[2]: unexpected key 'itl_ms'"),
        (lambda r: r.update(engine_start_s=-1.0), "engine_start_s = -1.0"),
        (lambda r: r.update(lab="no_such_lab"), "lab 'no_such_lab' has no spec"),
        (lambda r: r.update(schema=2), "schema 2, this checker reads 1"),
    ],
)
def test_a_broken_receipt_is_refused(break_it, message):
    r = phases_receipt()
    break_it(r)
    with pytest.raises(labs.ReceiptError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        labs.validate_receipt(r)


def test_committed_receipts_follow_the_schema():
    paths = sorted((ROOT / "receipts").glob("*/*.json"))
    if not paths:
        pytest.skip("no receipt is committed under receipts/ yet (none from a GPU run so far): nothing to check")
    for path in paths:
        receipt = labs.load_receipt(path)
        assert path.parent.name == labs.machine_slug(receipt["machine"]), path
        assert path.stem == receipt["lab"], path


def _by_claim(receipt) -> dict:
    return {r.claim: r.passed for r in labs.check(receipt)}


def test_check_refuses_a_lab_without_a_spec():
    r = phases_receipt()
    r["lab"] = "nope"
    with pytest.raises(KeyError, match="lab 'nope' has no spec; labs with a spec: .*phases"):
        labs.check(r)


def test_every_spec_is_consistent_and_named_after_its_module():
    for name, lab_spec in labs.SPECS.items():
        assert lab_spec.lab == name and lab_spec.claims and lab_spec.columns
        assert set(lab_spec.units) <= set(lab_spec.row) and set(lab_spec.key) <= set(lab_spec.row)
        assert (labs.LABS_DIR / f"{name}.py").is_file()


def test_a_spec_naming_keys_its_row_lacks_is_refused():
    base = labs.spec("phases")
    with pytest.raises(ValueError, match=r"units names \['itl_ms'\]"):
        labs.LabSpec(**{**base.__dict__, "units": {"itl_ms": "ms"}})
    with pytest.raises(ValueError, match="key names"):
        labs.LabSpec(**{**base.__dict__, "key": ("prompt",)})
    with pytest.raises(ValueError, match="every grid entry must have 2 values"):
        labs.LabSpec(**{**base.__dict__, "grid": ((128,),)})
    with pytest.raises(ValueError, match="lab name"):
        labs.LabSpec(**{**base.__dict__, "lab": "Phases-2"})


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA GeForce RTX 4090 D", None),  # 147 TFLOP/s, not the 4090's 165
        ("NVIDIA H100 PCIe", None),  # 2.0 TB/s, not the SXM's 3.35
        ("NVIDIA A100-SXM4-40GB", None),  # 1.56 TB/s, not the 80 GB's 2.04
        ("NVIDIA H200 NVL", None),
    ],
)
def test_gpu_lookup_by_device_name(name, key):
    assert labs.gpu_for_name(name) == (gpu(key) if key else None)


def test_machine_slug():
    assert labs.machine_slug({"kind": "gpu", "name": "NVIDIA GeForce RTX 4090"}) == "rtx-4090"
    assert labs.machine_slug({"kind": "gpu", "name": "NVIDIA A100-SXM4-80GB"}) == "a100-sxm4-80gb"
    assert labs.machine_slug({"kind": "cpu", "name": "AMD EPYC"}) == "cpu-amd-epyc"
    with pytest.raises(ValueError):
        labs.machine_slug({"kind": "cpu"})


@pytest.mark.parametrize(
    "kind, name, slug",
    [
        ("gpu", "NVIDIA GeForce RTX 4090 D", "rtx-4090-d"),  # China's 4090 D (fewer SMs): never rtx-4090/
        ("gpu", "NVIDIA GeForce RTX 4090D", "rtx-4090d"),
        ("gpu", "NVIDIA GeForce RTX 4090 Laptop GPU", "rtx-4090-laptop-gpu"),
        ("gpu", "NVIDIA H100 PCIe", "h100-pcie"),
        ("gpu", "NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
        ("gpu", "Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
        ("cpu", "Intel(R) Xeon(R) Processor", "cpu-intel-xeon-processor"),  # trademark marks dropped
    ],
)
def test_machine_slug_keeps_every_word_that_tells_variants_apart(kind, name, slug):
    assert labs.machine_slug({"kind": kind, "name": name}) == slug


def test_a_4090_d_receipt_is_refused_in_the_4090_folder(capsys):
    sys.path.insert(0, str(labs.LABS_DIR))
    import labkit

    d = {"kind": "gpu", "name": "NVIDIA GeForce RTX 4090 D"}
    labkit.check_receipt_folder(Path("receipts/rtx-4090-d/phases.json"), d)  # its own folder: accepted
    with pytest.raises(SystemExit):
        labkit.check_receipt_folder(Path("receipts/rtx-4090/phases.json"), d)
    assert "this machine's is receipts/rtx-4090-d/" in capsys.readouterr().err


def test_efficiency_of_a_gpuphases_receipt():
    eff = labs.efficiency(phases_receipt())
    # (128, 32): TPOT floor 14.0372 ms / measured 17.0 ms = 0.8257.
    assert (eff[0].row, eff[0].quantity, eff[0].unit, eff[0].measured) == (0, "TPOT", "ms", 17.0)
    assert eff[0].floor == pytest.approx(14.0372, abs=1e-4)
    assert eff[0].ratio == pytest.approx(14.037198 / 17.0, abs=1e-6)
    assert labs.efficiency(phases_receipt(kind="cpu")) is None
    unknown = phases_receipt()
    unknown["machine"]["name"] = "NVIDIA H100 PCIe"
    assert labs.efficiency(unknown) is None


def test_a_comparison_names_its_kind_and_the_row_key_it_lacks():
    from infercourse.labs.core import Compared, compare_rows

    with pytest.raises(ValueError, match="kind must be one of exact, floor, estimate, got 'rough'"):
        Compared(0, "steps", "steps", 3, 3, "rough")
    assert Compared(0, "step time", "ms", 3.0, 2.0, "floor").ratio == 1.5  # 3.0 / 2.0
    assert (Compared(0, "cached", "tokens", 0, 0).ratio, Compared(0, "cached", "tokens", 16, 0).ratio) == (
        1.0,
        math.inf,
    )
    receipt = phases_receipt(kind="cpu")
    del receipt["results"][2]["engine_steps"]
    with pytest.raises(labs.ReceiptError, match="row 2 of the phases receipt has no 'engine_steps'"):
        compare_rows(receipt, "engine steps", "steps", "engine_steps", lambda row: 1)
    # rows (128, 32) and (128, 128) only: 32 and 128 output tokens
    kept = compare_rows(
        receipt,
        "n",
        "tokens",
        "output_tokens",
        lambda row: 32,
        where=lambda r: r["prompt_tokens"] == 128 and r["output_tokens"] < 512,
    )
    assert [(c.row, c.measured, c.ratio) for c in kept] == [(0, 32, 1.0), (1, 128, 4.0)]
    assert labs.compared({**receipt, "partial": True}) == []


def test_expected_output_shows_committed_receipts(tmp_path):
    folder = tmp_path / "rtx-4090"
    folder.mkdir()
    (folder / "phases.json").write_text(json.dumps(phases_receipt()))
    (tmp_path / "cpu-amd-epyc").mkdir()
    (tmp_path / "cpu-amd-epyc" / "phases.json").write_text(json.dumps(phases_receipt(kind="cpu")))
    text = labs.expected_output("phases", receipts_dir=tmp_path)
    assert "Measured (committed receipts)" in text
    assert "AMD EPYC" not in text  # CPU receipts are not GPU measurements
    # first row: TTFT 20.0, TPOT 17.00, decode 17 ms x 31 = 0.527 s, efficiency 14.0372/17 = 83 %.
    # one receipt: its machine, vLLM, date and model are said once, above the table, not in every row
    assert (
        "machine NVIDIA GeForce RTX 4090; vLLM 0.26.0; date 2026-11-30; model `Qwen/Qwen2.5-7B-Instruct` (auto)."
    ) in text
    assert "| 128 | 32 | 20.0 | 17.00 | 0.53 | TPOT 83 % |" in text
    with pytest.raises(KeyError):
        labs.expected_output("nope")


def test_gpu_receipts_counts_gpu_runs_only(tmp_path):
    assert labs.gpu_receipts(receipts_dir=tmp_path) == []
    for folder, kind in (("rtx-4090", "gpu"), ("cpu-amd-epyc", "cpu")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "phases.json").write_text(json.dumps(phases_receipt(kind=kind)))
    assert [r["machine"]["kind"] for r in labs.gpu_receipts(receipts_dir=tmp_path)] == ["gpu"]


def test_expected_output_refuses_a_broken_committedphases_receipt(tmp_path):
    folder = tmp_path / "rtx-4090"
    folder.mkdir()
    broken = phases_receipt()
    del broken["versions"]
    (folder / "phases.json").write_text(json.dumps(broken))
    with pytest.raises(labs.ReceiptError, match="missing 'versions'"):
        labs.expected_output("phases", receipts_dir=tmp_path)


def test_check_receipts_script_exit_status(tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(phases_receipt()))
    bad.write_text(json.dumps(phases_receipt(ttft=(20.0, 22.0, 450.0))))
    script = ROOT / "scripts" / "check_receipts.py"
    failed = subprocess.run([sys.executable, script, bad], capture_output=True, text=True)  # as a file, once
    assert failed.returncode == 1 and "FAIL ttft_grows_with_prompt" in failed.stdout
    check = load_script("check_receipts")  # the other cases in this process: the same main(), no interpreter start
    assert check.main([str(good)]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "efficiency 83%" in out, out
    assert check.main([str(tmp_path / "none.json")]) == 2 and capsys.readouterr().err.count("\n") == 1
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{")  # not UTF-8: one line, not a traceback
    assert check.main([str(binary)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not UTF-8" in err


def test_every_committed_receipt_keeps_its_lesson_s_claims():
    # what scripts/check_receipts.py does, in the fast tier: an edited count in a committed receipt fails here
    paths = sorted(labs.RECEIPTS_DIR.glob("*/*.json"))
    assert paths, "no committed receipts found"
    failed = [f"{p}:\n{text}" for p in paths for passed, text in [labs.report(labs.load_receipt(p))] if not passed]
    assert not failed, "\n".join(failed)


def _write_with_labkit(tmp_path, rows, units):
    labkit = snippets.load("labs/labkit")
    path = tmp_path / "out" / "phases.json"
    argv = ["--model", ".cache/models/tiny-qwen2", "--receipt", str(path)]
    args = labkit.lab_parser("phases", "demo", max_model_len=4224).parse_args(argv)
    written = labkit.write_receipt(args, units, rows, 12.3456, {"repeats": 3, "max_num_batched_tokens": 2048})
    return path, written


def test_labkit_receipt_passes_the_validator(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)  # vLLM's default: its own process
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # torch's default: one thread per core
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    rows = phases_receipt()["results"]
    path, written = _write_with_labkit(tmp_path, rows, labs.phases.SPEC.units)
    receipt = labs.load_receipt(path)  # the envelope labkit writes, then the phases spec's rows
    assert receipt == written and receipt["schema"] == labs.SCHEMA_VERSION
    assert receipt["engine_start_s"] == 12.346 and receipt["units"]["engine_start_s"] == "s"
    assert receipt["dtype"] == "auto" and receipt["machine"]["kind"] in ("cpu", "gpu")
    # the parsed --enforce-eager (off: not on the command line), where the engine core ran (unset:
    # vLLM's default, "1"), the OpenMP thread count (unset: None) and the CPU build's KV GiB (set above)
    # join the lab's own settings
    assert receipt["settings"] == {
        "enforce_eager": False,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "1",
        "OMP_NUM_THREADS": None,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "repeats": 3,
        "max_num_batched_tokens": 2048,
    }
    assert _by_claim(receipt)["engine_steps_exact"] is True


def test_labkit_receipt_with_a_missing_row_key_is_refused(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "step_tokens"} for r in phases_receipt()["results"]]
    path, _ = _write_with_labkit(tmp_path, rows, labs.phases.SPEC.units)
    with pytest.raises(labs.ReceiptError, match="missing 'step_tokens'"):
        labs.load_receipt(path)


@pytest.mark.parametrize(
    ("model", "label"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", "`Qwen/Qwen2.5-7B-Instruct`"),  # a hub id, as it is
        ("/home/me/.cache/models/tiny-qwen2", "`tiny-qwen2` (local folder)"),  # a machine's own path
        (".cache/models/tiny-qwen2", "`tiny-qwen2` (local folder)"),
        ("models/qwen", "`models/qwen`"),  # one slash is a hub id's shape: shown as written
    ],
)
def test_a_table_names_a_local_model_folder_by_its_last_part(model, label):
    assert labs.model_label(model) == label


def test_a_lab_s_row_schema_is_its_script_s_row(tmp_path, monkeypatch):
    # snippets/labs/phases.py declares ROW once; read by hand there: two ints, three numbers, two ints
    assert labs.phases.SPEC.row == {
        "prompt_tokens": (int,),
        "output_tokens": (int,),
        "ttft_ms": (int, float),
        "tpot_ms": (int, float),
        "decode_s": (int, float),
        "engine_steps": (int,),
        "step_tokens": (int,),
    }
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "odd.py").write_text('ROW = {"batch": "int", "kernel": "string | None"}\n')
    monkeypatch.setattr(labs.core, "LABS_DIR", tmp_path / "labs")
    monkeypatch.setattr(snippets, "SNIPPETS_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"ROW\['kernel'\] = 'string \| None' names \['string'\]; use \['int'"):
        labs.core.lab_row("odd")


def test_a_lab_s_settings_are_its_script_s_literals_and_a_missing_one_is_named(tmp_path, monkeypatch):
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "odd.py").write_text('BATCHES = (1, 8)\nMODEL = "m"\nSTEP = BATCHES[0]\n')
    monkeypatch.setattr(labs.core, "LABS_DIR", tmp_path / "labs")
    monkeypatch.setattr(snippets, "SNIPPETS_DIR", tmp_path)
    lab = labs.core.lab_settings("odd")
    assert (lab.BATCHES, lab.MODEL) == ((1, 8), "m")
    with pytest.raises(AttributeError, match=r"snippets/labs/odd\.py assigns no literal STEP .*\['BATCHES', 'MODEL'\]"):
        lab.STEP  # noqa: B018 (a subscript is not a literal)
    with pytest.raises(FileNotFoundError, match="no lab 'even'"):
        labs.core.lab_settings("even")


SPEC_MODULE = """
from infercourse.labs.core import ClaimResult, claim, gpu_timing, lab_spec, ttft_grows


@gpu_timing
def later(receipt):
    return ClaimResult("later", "", True, "")


@claim
def first(receipt):
    return ClaimResult("first", "", True, "")


def helper(receipt):
    return ClaimResult("helper", "", True, "")


def prediction():
    return "p"
"""


def test_lab_spec_takes_the_claims_a_module_marks_in_its_order_and_its_prediction(tmp_path, monkeypatch):
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "odd.py").write_text('ROW = {"batch": "int", "step_ms": "number"}\nUNITS = {"step_ms": "ms"}')
    monkeypatch.setattr(labs.core, "LABS_DIR", tmp_path / "labs")
    monkeypatch.setattr(snippets, "SNIPPETS_DIR", tmp_path)
    module = types.ModuleType("odd")
    monkeypatch.setitem(sys.modules, "odd", module)
    exec(compile(SPEC_MODULE, "odd.py", "exec"), module.__dict__)
    spec = labs.core.lab_spec("odd", key=("batch",), header="step", columns=())
    # marked ones only, in the module's order; lab 0B's ttft_grows, imported from core, is not the module's
    assert [c.__name__ for c in spec.claims] == ["later", "first"]
    assert (spec.lab, spec.prediction(), spec.demands, spec.units) == ("odd", "p", None, {"step_ms": "ms"})
    assert spec.claims[0]({"machine": {"kind": "cpu"}}).passed is None  # gpu_timing still wraps
    del module.first, module.later
    with pytest.raises(ValueError, match="^odd has no claim marked with @claim or @gpu_timing$"):
        labs.core.lab_spec("odd", key=("batch",), header="step", columns=())


def test_a_receipt_names_no_folder_of_the_machine_that_ran_it(tmp_path, monkeypatch):
    """Paths inside the repository are written relative to it; others in the command as .../<name>."""
    labkit = snippets.load("labs/labkit")
    model = str(ROOT / ".cache" / "models" / "tiny-qwen2")  # an absolute path inside the repository
    path = tmp_path / "phases.json"
    argv = ["--model", model, "--receipt", str(path)]
    monkeypatch.setattr(labkit.receipt.sys, "argv", [str(ROOT / "snippets" / "labs" / "phases.py"), *argv])
    args = labkit.lab_parser("phases", "demo", max_model_len=4224).parse_args(argv)
    written = labkit.write_receipt(args, {}, [], 1.0, {})
    assert written["model"] == ".cache/models/tiny-qwen2"
    assert written["command"] == (
        "python snippets/labs/phases.py --model .cache/models/tiny-qwen2 --receipt .../phases.json"
    )
    assert labkit.portable_path("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"  # a hub id, as given

    # a repository whose .cache links to a data disk (AutoDL's /root/autodl-tmp): still written relative to it
    repo, disk = tmp_path / "repo", tmp_path / "disk"
    (disk / "models" / "m").mkdir(parents=True)
    repo.mkdir()
    (repo / ".cache").symlink_to(disk)
    monkeypatch.setattr(labkit.receipt, "REPOSITORY", repo)
    assert labkit.repository_path(str(repo / ".cache" / "models" / "m")) == ".cache/models/m"


def test_no_committed_receipt_names_a_folder_of_the_machine_that_ran_it():
    """Issue 29 item 7: a committed receipt's command and model carry no absolute path (labkit writes paths
    inside the repository relative to it, others as .../<name>)."""
    import shlex

    found = []
    for path in sorted(labs.RECEIPTS_DIR.glob("*/*.json")):
        receipt = labs.load_receipt(path)
        words = [*shlex.split(receipt["command"]), receipt["model"]]
        found += [f"{path.name}: {w}" for w in words if w.startswith("/") or "/tmp" in w or "/home/" in w]
    assert not found, found


def test_a_table_of_two_receipts_keeps_what_differs_in_columns(tmp_path):
    gpu, other = phases_receipt(), phases_receipt()
    other["date_utc"] = "2026-12-01T10:00:00Z"  # a rerun on the same card and vLLM
    text = labs.measured_table(labs.spec("phases"), [gpu, other])
    assert "machine NVIDIA GeForce RTX 4090; vLLM 0.26.0; model" in text and "| date |" in text
    assert "| 2026-12-01 | 128 | 32 |" in text


def test_an_interrupted_run_keeps_its_rows_in_a_partial_receipt(tmp_path, capsys):
    """labkit.measured_rows keeps the list a lab fills; Ctrl-C (the excepthook labkit.prepare installs) writes the
    rows measured so far, marked partial, with one line on stderr; no claim is judged on it, and none may be
    committed."""
    import argparse

    labkit = snippets.load("labs/labkit")
    path = tmp_path / "cpu" / "phases.json"
    args = argparse.Namespace(
        lab="phases", receipt=path, model="Qwen/Qwen2.5-7B-Instruct", load_format="dummy", max_model_len=8192,
        enforce_eager=True,
    )  # fmt: skip
    whole = phases_receipt()
    rows = labkit.measured_rows(args, labs.spec("phases").units)
    rows.append(dict(whole["results"][0]))  # the first grid row measured, then Ctrl-C
    labkit.engine._interrupted(KeyboardInterrupt, KeyboardInterrupt(), None)
    line = capsys.readouterr().err.strip()
    assert line.startswith("interrupted: ") and f"the 1 row(s) measured so far are in {path}, marked partial" in line
    assert "\n" not in line  # one line, no traceback
    receipt = labs.load_receipt(path)
    assert receipt["partial"] is True and receipt["results"] == [whole["results"][0]]
    assert {r.passed for r in labs.check(receipt)} == {None}
    assert "not judged" in labs.check(receipt)[0].detail
    with pytest.raises(labs.ReceiptError, match="a partial receipt of phases .* is committed; rerun the lab"):
        labs.committed_receipts("phases", tmp_path)


def test_a_partial_flag_is_only_ever_true():
    receipt = phases_receipt()
    receipt["partial"] = False
    with pytest.raises(labs.ReceiptError, match="'partial' is written only as true"):
        labs.validate_receipt(receipt)


def test_a_text_column_aligns_left_and_a_count_column_groups_thousands():
    """Column.text and Column.count, the two shorthands the specs use: the header defaults to the key."""
    from infercourse.labs.core import Column

    run, batch = Column.text("run"), Column.count("batch", "B")
    assert (run.header, run.align_right, run.format("eager")) == ("run", False, "eager")
    assert (batch.header, batch.align_right, batch.format(12_345)) == ("B", True, "12,345")
