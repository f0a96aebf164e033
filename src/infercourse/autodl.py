"""Running the labs on AutoDL: where files go, and every shell command the quickstart page shows.

One place for the AutoDL facts (paths, the download client's flags) and for the commands built
from them: the lab notebooks (``docs/notebooks/``, from ``templates/lab_notebook.py``) run them, the
page (``docs/autodl.md``, values in :mod:`infercourse.pages.autodl_page`) shows these strings as they are,
and ``tests/test_autodl.py`` checks each one (bash syntax, the flags of the pinned clients, paths equal to
the labs' defaults). The price and time figures come from the
registry (``registry.AUTODL_RTX_4090``) and :mod:`infercourse.labbox`, as the lab boxes' do.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from infercourse import labbox, registry

DATA_DISK = "/root/autodl-tmp"
"""AutoDL's data disk, a local disk kept when the instance is shut down; the system disk (``/``) holds
the image, Python and its packages and is small. Source: :data:`DOCS_ENV`."""

SYSTEM_DISK_GB = 30
"""The system disk's size in AutoDL's documentation (GB), :data:`DOCS_ENV`; ``df -h /`` shows an instance's own."""

DATA_DISK_MIN_GB = 50
"""The data disk's smallest size in AutoDL's documentation (GB, "50GB起", expandable), :data:`DOCS_ENV`."""

DOCS_ENV = registry.Source(
    'AutoDL documentation, "实例中的目录" (directories of an instance) table: system disk "/" 30GB, data disk '
    "/root/autodl-tmp from 50GB (expandable), both kept when the instance is shut down; only the system disk "
    "is saved into an image or moved with a migrated instance",
    "https://www.autodl.com/docs/env/",
    "secondary",
    "read in a stored copy of the page on 2026-12-05; check `df -h` on your instance",
)

CACHE_ENV: dict[str, tuple[str, str]] = {
    "MODELSCOPE_CACHE": (
        f"{DATA_DISK}/cache/modelscope",
        "the models (vLLM's ModelScope downloads and `modelscope download`)",
    ),
    "HF_HOME": (f"{DATA_DISK}/cache/huggingface", "anything fetched from Hugging Face"),
    "VLLM_CACHE_ROOT": (f"{DATA_DISK}/cache/vllm", "vLLM's compile caches"),
    "PIP_CACHE_DIR": (f"{DATA_DISK}/cache/pip", "pip's wheel cache (the CUDA 13 torch is large)"),
}
"""Every cache a lab run fills, moved to the data disk: ``{variable: (path, what lands there)}``.
``MODELSCOPE_CACHE``: where ModelScope's client
(``modelscope_hub/constants.py:562`` at modelscope-hub 0.5.1) and so vLLM's ModelScope downloads
(``vllm/model_executor/model_loader/weight_utils.py:167-181`` at v0.26.0: ``snapshot_download`` with the
client's default cache) put models; ``HF_HOME``: Hugging Face's cache (huggingface_hub's environment
variables); ``VLLM_CACHE_ROOT``: vLLM's compile caches (``vllm/envs.py:677`` at v0.26.0); ``PIP_CACHE_DIR``:
pip's wheel cache (the CUDA 13 torch and its libraries are several GB)."""

MODELSCOPE_HUB_VERSION = "0.5.1"
"""modelscope-hub, the package that owns the ``modelscope`` command for modelscope 1.40.2 (its
``modelscope/cli/cli.py`` delegates to ``modelscope_hub.cli.main``); pinned in requirements-labs-gpu.txt."""

MODELSCOPE_DOWNLOAD_OPTIONS = frozenset(
    {
        "--repo-type",
        "--revision",
        "--cache-dir",
        "--local-dir",
        "--max-workers",
        "--include",
        "--exclude",
        "--force",
        "--continue-on-error",
        "--tracker-path",
        "--retry-failed",
    }
)
"""The options ``modelscope download`` shows at modelscope-hub 0.5.1 (the first spelling of each
``add_argument`` without ``help=SUPPRESS`` in ``DownloadCommand.register``,
``modelscope_hub/cli/download.py:37-97``, and ``add_repo_type_arg``, ``cli/base.py:82``). Its hidden
legacy spellings (``--model``, ``--local_dir``, ``--cache_dir``, ``cli/compat.py``) still work but print a
deprecation warning (``normalize_download_args``): the page uses the positional model id."""

COURSE_MODEL = registry.COURSE_MODEL
"""The model every lab loads by default (``--model`` of ``snippets/labs/labkit/cli.py``'s ``lab_parser``)."""

SESSION = "labs"
"""The tmux session the page starts the labs in."""

ENV_BLOCK = "\n".join(
    [
        "cat >> ~/.bashrc <<'EOF'",
        *(f"export {name}={path}" for name, (path, _) in CACHE_ENV.items()),
        "export VLLM_USE_MODELSCOPE=True",
        "EOF",
        "source ~/.bashrc",
        f"mkdir -p {' '.join(path for path, _ in CACHE_ENV.values())}",
    ]
)
"""Once per instance: every cache on the data disk, and vLLM's downloads through ModelScope."""

CHECK_BLOCK = f"""nvidia-smi                      # "CUDA Version: 13.0" or newer: driver {labbox.LABKIT_MIN_DRIVER}+
python --version                # 3.10, 3.11 or 3.12
ldd --version | head -1         # glibc 2.31 or newer (Ubuntu 20.04+)
df -h / {DATA_DISK}       # the small system disk, and the data disk"""
"""First look at a new instance: driver, Python, disks."""

INSTALL_BLOCK = f"""cd {DATA_DISK}
COURSE_REPO=https://github.com/YOUR-ACCOUNT/YOUR-FORK.git  # REPLACE: the git address of the course (your fork)
git clone "$COURSE_REPO" infercourse && cd infercourse
python scripts/run_labs.py --check                        # before installing: only "vLLM is not installed" may show
pip install -r requirements-labs-gpu.lock                  # vLLM {registry.VLLM_GPU_VERSION}, its torch, ModelScope"""
"""Clone, preflight (the driver is checked before anything is installed), install."""

PIP_MIRROR = "https://mirrors.aliyun.com/pypi/simple/"
"""A PyPI mirror in China for instances whose pip has no index configured (``pip config list``)."""

PIP_BLOCK = f"""pip config list                                   # an index-url line: a mirror is set already
pip config set global.index-url {PIP_MIRROR}   # only if none is set and PyPI is slow"""
"""pip configuration, if needed."""

HUBS = ("modelscope", "huggingface")
"""The hubs :func:`download_command` knows."""


def download_command(model_id: str, hub: str = "modelscope") -> list[str]:
    """The command that downloads every file of ``model_id`` into its hub's cache on the data disk
    (:data:`CACHE_ENV`), where vLLM finds it when a lab loads the same id: ``modelscope download <id>``
    (modelscope-hub :data:`MODELSCOPE_HUB_VERSION`, ``modelscope_hub/cli/download.py``) or
    ``hf download <id>`` (huggingface_hub's CLI, installed with vLLM's transformers). Not ``--local-dir``:
    a lab run with ``--model <folder>`` records that folder, and its receipt no longer names the model.

    Raises:
        ValueError: ``hub`` is not one of :data:`HUBS`, or ``model_id`` is not ``owner/name``.
    """
    owner, _, name = model_id.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f"model id {model_id!r} is not 'owner/name' (e.g. {COURSE_MODEL})")
    if hub not in HUBS:
        raise ValueError(f"hub {hub!r} is not one of {', '.join(HUBS)}")
    return ["modelscope" if hub == "modelscope" else "hf", "download", model_id]


def hub_env(hub: str) -> dict[str, str]:
    """Environment for a lab on AutoDL: every cache of :data:`CACHE_ENV` on the data disk, and
    ``VLLM_USE_MODELSCOPE=True`` when ``hub`` is ModelScope (vLLM then fetches through it).

    Raises:
        ValueError: ``hub`` is not one of :data:`HUBS`.
    """
    if hub not in HUBS:
        raise ValueError(f"hub {hub!r} is not one of {', '.join(HUBS)}")
    env = {name: path for name, (path, _) in CACHE_ENV.items()}
    return {**env, **({"VLLM_USE_MODELSCOPE": "True"} if hub == "modelscope" else {})}


def model_cache(env: Mapping[str, str]) -> Path:
    """The folder a lab's vLLM downloads a hub model into, under the environment ``env`` (``os.environ``):
    ModelScope's cache when ``VLLM_USE_MODELSCOPE`` is ``true`` (any case, as ``vllm/envs.py`` reads it at
    v0.26.0): ``MODELSCOPE_CACHE``, default ``~/.cache/modelscope`` (modelscope-hub's ``constants.py``);
    else Hugging Face's hub cache: ``HF_HUB_CACHE``, else ``$HF_HOME/hub``, default ``~/.cache/huggingface/hub``
    (huggingface_hub's environment variables)."""
    if env.get("VLLM_USE_MODELSCOPE", "False").lower() == "true":
        return Path(env.get("MODELSCOPE_CACHE", "~/.cache/modelscope")).expanduser()
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    return Path(env.get("HF_HOME", "~/.cache/huggingface")).expanduser() / "hub"


def disk_problem(folder: str | Path, need_bytes: float) -> str | None:
    """One line when the disk that ``folder`` (or its nearest existing parent) is on has fewer than
    ``need_bytes`` bytes free, else None. Sizes are said in GB (10^9 B)."""
    place = Path(folder)
    while not place.exists() and place != place.parent:
        place = place.parent
    free = shutil.disk_usage(place).free
    if free >= need_bytes:
        return None
    return (
        f"{free / 1e9:.1f} GB free on the disk of {place}, the download needs {need_bytes / 1e9:.1f} GB: "
        f"free space there, or put the caches on the data disk ({DATA_DISK}, expandable in AutoDL's console)"
    )


DOWNLOAD_BLOCK = f"""{" ".join(download_command(COURSE_MODEL))}   # into $MODELSCOPE_CACHE, where vLLM looks for it
python scripts/run_labs.py --fetch          # or every model of every lab (table below); --lab NAME: one lab's"""
"""The course's model, fetched once into the cache the labs read (so they keep ``--model``'s default), or every
model the labs load (``run_labs.py --fetch``), so no lab spends its time limit downloading."""

RUN_BLOCK = f"""tmux new -s {SESSION}                   # a session that outlives the browser tab
cd {DATA_DISK}/infercourse
python scripts/run_labs.py 2>&1 | tee run_labs.log
# detach: Ctrl-b then d; come back: tmux attach -t {SESSION}"""
"""Every lab, inside tmux."""

TMUX_INSTALL = "which tmux || (apt-get update && apt-get install -y tmux)"
"""tmux, where the image lacks it."""

LAB_CARD_DEVICE_NAME = "NVIDIA GeForce RTX 4090"
"""How nvidia-smi (and torch) name the lab card: the name a receipt's machine folder is made from."""


def contribute_block(folder: str) -> str:
    """The commands that get a run's receipts onto the site, for the receipts folder ``folder``
    (``infercourse.labs.machine_slug`` of the GPU the labs detected, e.g. ``"rtx-4090"``)."""
    return f"""MACHINE={folder}                        # the folder run_labs.py printed: receipts/$MACHINE/
python scripts/check_receipts.py receipts/$MACHINE/*.json   # each lesson's claims, and the efficiency
git checkout -b receipts-$MACHINE
git add receipts/$MACHINE && git commit -m "Receipts: $MACHINE, vLLM {registry.VLLM_GPU_VERSION}"
git push origin receipts-$MACHINE                           # to your fork, then open a pull request
make serve                                                  # locally: your receipts beside the predictions"""


FAILURE_COMMANDS: dict[str, str] = {
    "oom": """nvidia-smi --query-compute-apps=pid,used_memory --format=csv   # who else holds GPU memory: stop it
python snippets/labs/phases.py -v                              # one lab, vLLM's own log on screen""",
    "driver": f"""nvidia-smi --query-gpu=name,driver_version --format=csv  # < {labbox.LABKIT_MIN_DRIVER}: new host""",
    "download": f"""modelscope download {COURSE_MODEL}                   # again: it resumes, finished files stay
modelscope download {COURSE_MODEL} --max-workers 1   # one stream at a time on a flaky link""",
    "disk": f"""df -h / {DATA_DISK}
du -sh {DATA_DISK}/cache/* ~/.cache 2>/dev/null   # what fills them
pip cache purge                                      # pip's wheel cache""",
}
"""A command or two for each common failure, by failure (the page says what each means)."""
