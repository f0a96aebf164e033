"""The AutoDL quickstart (docs/autodl.md): every command it shows is bash, uses only flags the pinned
vLLM and ModelScope client have, and names the paths the labs use; its time and cost are the runner's
estimate; and the receipts page shows the committed receipts, the CPU ones labelled."""

from __future__ import annotations

import ast
import shlex
import subprocess
import sys
import zipfile

import pytest
from bs4 import BeautifulSoup

from conftest import ROOT, load_script
from infercourse import autodl, course, labbox, labs, registry
from infercourse.pages import values_for

BLOCKS = {
    "check": autodl.CHECK_BLOCK,
    "env": autodl.ENV_BLOCK,
    "pip": autodl.PIP_BLOCK,
    "install": autodl.INSTALL_BLOCK,
    "download": autodl.DOWNLOAD_BLOCK,
    "tmux": autodl.TMUX_INSTALL,
    "run": autodl.RUN_BLOCK,
    "contribute": autodl.contribute_block("rtx-4090"),
    **{f"failure {k}": v for k, v in autodl.FAILURE_COMMANDS.items()},
}
LAB_CARD_FOLDER = labs.machine_slug({"kind": "gpu", "name": autodl.LAB_CARD_DEVICE_NAME})
MODELSCOPE_HUB_WHEEL = next(
    (ROOT / ".cache" / "wheels").glob(f"modelscope_hub-{autodl.MODELSCOPE_HUB_VERSION}-*.whl"), None
)


def _commands(prefix: str) -> list[list[str]]:
    """Every command line of the page's blocks that starts with ``prefix``, as words (comments dropped)."""
    found = []
    for text in BLOCKS.values():
        for line in text.splitlines():
            words = shlex.split(line, comments=True)
            if words[: len(prefix.split())] == prefix.split():
                found.append(words)
    return found


@pytest.mark.parametrize("name", BLOCKS)
def test_every_block_is_valid_bash(name):
    done = subprocess.run(["bash", "-n"], input=BLOCKS[name], capture_output=True, text=True)
    assert done.returncode == 0, f"{name}: {done.stderr}"


def test_modelscope_commands_use_the_pinned_client_s_flags_and_the_labs_model():
    commands = _commands("modelscope")
    assert len(commands) >= 3, commands
    for words in commands:
        assert words[1] == "download", words
        options = [w for w in words if w.startswith("-")]
        assert set(options) <= autodl.MODELSCOPE_DOWNLOAD_OPTIONS, (
            words,
            set(options) - autodl.MODELSCOPE_DOWNLOAD_OPTIONS,
        )
        assert words[2] == autodl.COURSE_MODEL, words  # positional id: `--model` is the deprecated spelling
    pins = (ROOT / "requirements-labs-gpu.txt").read_text()
    assert f"modelscope-hub=={autodl.MODELSCOPE_HUB_VERSION}\n" in pins


def _visible_options(tree: ast.Module, function: str) -> list[str]:
    """First option string of each ``add_argument`` in ``function`` of ``tree`` without ``help=SUPPRESS``."""
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    found = []
    for call in ast.walk(fn):
        if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "add_argument":
            hidden = any(k.arg == "help" and getattr(k.value, "id", None) == "SUPPRESS" for k in call.keywords)
            first = call.args[0].value if call.args and isinstance(call.args[0], ast.Constant) else ""
            if first.startswith("--") and not hidden:
                found.append(first)
    return found


@pytest.mark.skipif(
    MODELSCOPE_HUB_WHEEL is None,
    reason=f"no modelscope_hub-{autodl.MODELSCOPE_HUB_VERSION} wheel in .cache/wheels/ "
    f"(pip download --no-deps modelscope-hub=={autodl.MODELSCOPE_HUB_VERSION} -d .cache/wheels)",
)
def test_download_options_are_the_pinned_wheel_s():
    with zipfile.ZipFile(MODELSCOPE_HUB_WHEEL) as wheel:
        download = ast.parse(wheel.read("modelscope_hub/cli/download.py"))
        base = ast.parse(wheel.read("modelscope_hub/cli/base.py"))
    found = set(_visible_options(download, "register")) | set(_visible_options(base, "add_repo_type_arg"))
    assert found == autodl.MODELSCOPE_DOWNLOAD_OPTIONS


def test_vllm_names_and_install_text_pass_the_vllm_api_check():
    check = load_script("check_vllm_api")
    text = "\n".join(BLOCKS.values())
    surface = check.gpu_surface()
    problems = check.check_text(text, surface, "autodl") + check.token_problems(text, surface, "autodl")
    problems += check.install_doc_problems({"autodl": text}, surface["build"]["cudart_majors"][-1])
    assert not problems, problems


def test_paths_and_scripts_are_the_labs_own():
    # every script the page runs exists and has the flag it is given
    for words in _commands("python"):
        if words[1].endswith(".py"):
            assert (ROOT / words[1]).is_file(), words
    run_labs_help = subprocess.run(
        [sys.executable, "scripts/run_labs.py", "--help"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert all(
        w in run_labs_help for words in _commands("python scripts/run_labs.py") for w in words[2:] if w.startswith("-")
    )
    phases_help = subprocess.run(
        [sys.executable, "snippets/labs/phases.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    ).stdout
    assert all(w in phases_help for words in _commands("python snippets/labs/phases.py") for w in words[2:])
    assert (ROOT / "requirements-labs-gpu.txt").is_file()
    # the model the page downloads is the labs' default --model; every cache is on the data disk
    cli = (ROOT / "snippets" / "labs" / "labkit" / "cli.py").read_text()
    assert f'p.add_argument("--model", default="{autodl.COURSE_MODEL}"' in cli
    assert all(path.startswith(autodl.DATA_DISK + "/") for path, _ in autodl.CACHE_ENV.values())
    for name, (path, _) in autodl.CACHE_ENV.items():
        assert f"export {name}={path}\n" in autodl.ENV_BLOCK
    # the clone is where the run block looks for it
    assert (
        f"cd {autodl.DATA_DISK}\n" in autodl.INSTALL_BLOCK
        and 'git clone "$COURSE_REPO" infercourse' in autodl.INSTALL_BLOCK
    )
    assert f"cd {autodl.DATA_DISK}/infercourse\n" in autodl.RUN_BLOCK
    # the receipts folder of the lab card is the one every lesson's lab box writes to
    assert f"--receipt receipts/{LAB_CARD_FOLDER}/phases.json" in labbox.lab_box("phases.py")


def test_time_and_cost_are_the_runner_s_estimate():
    v = {k: x.value for k, x in values_for("autodl.md").items()}
    # the first download: 15,231,233,024 B (Qwen2.5-7B in BF16) / 50e6 B/s = 304.62 s = 5.077 min
    assert v["first_download_min"] == pytest.approx(15_231_233_024 / 50e6 / 60)
    assert v["first_download_min"] == pytest.approx(5.0771, abs=1e-4)
    # each lab: its engines and decode steps from labbox.lab_minutes, as run_labs.py's estimate prints them
    for row in v["lab_rows"]:
        m = labbox.lab_minutes(row["lab"])
        assert row["minutes"] == pytest.approx(m["engines"] + m["decode"] + m["arrivals"])
        # priced per card: lab 7A runs tensor parallelism on two cards at once, every other lab on one
        cards = 2 if row["lab"] == "tensor_parallel" else 1
        assert row["cards"] == cards
        assert row["cny"] == pytest.approx(row["minutes"] / 60 * registry.AUTODL_RTX_4090.cny_per_hour * cards)
    # in the course's order (course.yml: 0A's lab first), not the file names' order
    course_order = [lesson["lab"] for lesson in course.live_lessons() if lesson.get("lab")]
    assert course_order != sorted(course_order)  # the file names' order differs: the check can tell them apart
    assert [r["lab"] for r in v["lab_rows"]] == course_order
    assert sorted(r["lab"] for r in v["lab_rows"]) == sorted(labs.wired())
    total = sum(r["minutes"] for r in v["lab_rows"]) + v["first_download_min"] + v["extra_download_min"]
    assert v["total_min"] == pytest.approx(total)
    tp_minutes = next(r["minutes"] for r in v["lab_rows"] if r["lab"] == "tensor_parallel")
    # at 1.98 yuan/h per card (AutoDL's price as read in September 2026); lab 7A's minutes paid twice
    assert v["total_cny"] == pytest.approx((total + tp_minutes) / 60 * 1.98)
    assert v["first_download_cny"] == pytest.approx(5.0771 / 60 * 1.98, abs=1e-4)  # 5.0771 min at 1.98 = 0.1675
    assert (
        registry.AUTODL_RTX_4090.source.kind == "assumption"
        and "September 2026" in registry.AUTODL_RTX_4090.source.where
    )


def _code_blocks(site, page: str) -> list[str]:
    soup = BeautifulSoup((site / page / "index.html").read_text(encoding="utf-8"), "html.parser")
    return [pre.get_text().strip("\n") for pre in soup.select(".md-content pre")]


def test_the_page_shows_exactly_the_checked_commands(site):
    shown = _code_blocks(site, "autodl")
    assert sorted(shown) == sorted(BLOCKS.values())
    text = BeautifulSoup((site / "autodl" / "index.html").read_text(encoding="utf-8"), "html.parser")
    prose = " ".join(text.select_one(".md-content").get_text().split())
    check = load_script("check_vllm_api")
    surface = check.gpu_surface()
    assert not check.install_doc_problems({"autodl page": prose}, surface["build"]["cudart_majors"][-1])
    assert "receipts/rtx-4090-d/" in prose  # the RTX 4090 D has a folder of its own


def test_receipts_page_shows_every_committed_receipt_and_labels_the_cpu_ones(site):
    soup = BeautifulSoup((site / "receipts" / "index.html").read_text(encoding="utf-8"), "html.parser")
    committed = sorted((ROOT / "receipts").glob("*/*.json"))
    assert committed, "no committed receipt"
    text = soup.select_one(".md-content").get_text(" ")
    for lab in labs.wired():
        section = soup.find(id=lab)
        assert section is not None, lab
        # the lab's section: its prediction, then a table per kind of machine, until the next lab
        body = []
        for el in section.find_all_next():
            if el.name == "h2":
                break
            body.append(el)
        words = " ".join(" ".join(e.get_text(" ").split()) for e in body if e.name in ("p", "table"))
        assert "Prediction for the RTX 4090" in words, lab
        cpu = [p for p in committed if p.stem == lab and p.parent.name.startswith("cpu-")]
        if cpu:
            assert "CPU run of the tiny model: shape, not GPU numbers." in words, lab
            rows = [e for e in body if e.name == "table"][-1].select("tbody tr")
            assert len(rows) == sum(len(labs.load_receipt(p)["results"]) for p in cpu), lab
    assert "python scripts/check_receipts.py" in text and "pull request" in text


def test_the_download_table_lists_every_model_the_lab_scripts_load_once():
    """Read from the scripts (``labs.lab_models``): 6A's draft and 8A's model are one download. Sizes by hand:
    Qwen2.5-0.5B's 494,032,768 parameters (its config: 24 layers, hidden 896, MLP 4,864, 151,936-token tied
    embedding) x 2 B = 988,065,536 B; Qwen2.5-7B's 7,615,616,512 x 2 B = 15,231,233,024 B."""
    v = {k: x.value for k, x in values_for("autodl.md").items()}
    assert [(d["model"], d["who"]) for d in v["downloads"]] == [
        ("Qwen/Qwen2.5-7B-Instruct", "every other lab"),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", "lab 3A"),
        ("Qwen/Qwen2.5-0.5B-Instruct", "labs 6A, 8A"),
        ("allenai/OLMoE-1B-7B-0924-Instruct", "lab 7B"),
    ]
    assert v["downloads"][0]["bytes"] == 15_231_233_024 and v["downloads"][2]["bytes"] == 988_065_536
    assert v["extra_download_labs"] == "3A, 6A, 7B and 8A"
