# %% [markdown]
# # Lab notebook __LESSON__ · __TITLE__
#
# The GPU lab of [lesson __LESSON__](__LESSON_URL__), `__LAB__.py` in `snippets/labs/`, as a notebook for
# JupyterLab on a rented GPU (AutoDL: an RTX 4090 whose driver is 580 or newer). Open it inside a clone of
# the course's repository (it is `docs/notebooks/__LAB__.ipynb` there) and run the cells in order:
# your own predictions first, then preflight, install, model download, the lab, and its receipt against the
# lesson's prediction.
# The parameters cell below says what each setting does.
#
# Generated from the lab script by `scripts/make_notebooks.py`: edit the script, or the one template
# all the lab notebooks share (`templates/lab_notebook.py`), then regenerate; never this file.
#
# ## What the lab does
#
# __DOCSTRING__

# %%
import os
import sys
from pathlib import Path

from IPython.display import Markdown, display

LAB = "__LAB__"
ROOT = next((p for p in (Path.cwd(), *Path.cwd().parents) if (p / "snippets" / "labs" / "labkit").is_dir()), None)
if ROOT is None:
    raise SystemExit(f"error: open this notebook inside a clone of the course's repository (it runs {LAB}.py there)")
for folder in ("src", "snippets/labs", "scripts"):
    if str(ROOT / folder) not in sys.path:
        sys.path.insert(0, str(ROOT / folder))

import run_labs  # noqa: E402  (scripts/: the lab runner of `make labs`)

import labkit  # noqa: E402  (snippets/labs/: the preflight and machine every lab uses)
from infercourse import autodl, labnotebook, labs  # noqa: E402

# %% tags=["parameters"]
MODEL_ID = "__MODEL_ID__"  # the lab's model on the hub
MODEL = MODEL_ID  # what the lab loads: the hub id (read from the cache the download fills) or a folder
HUB = "modelscope"  # or "huggingface": where the download cell fetches from
INSTALL = True  # pip install -r requirements-labs-gpu.lock into PYTHON (minutes, once per machine)
DOWNLOAD = True  # fetch MODEL_ID into the hub's cache on the data disk (finished files are kept)
LOAD_FORMAT = "auto"  # "dummy": random weights of the real architecture (timings are the same)
CPU = False  # vLLM's CPU build with the lab's small CPU arguments (what the course's CI runs)
PYTHON = sys.executable  # the Python that runs the lab: it has vLLM, or gets it in the install cell
RECEIPT = ""  # where the receipt goes; "" = receipts/<this machine>/<lab>.json
REPLACE = False  # True: replace an existing receipt there (a receipt is a measurement: never replaced by accident)
TIMEOUT_S = run_labs.LAB_TIMEOUT_S  # the lab is stopped after this many seconds
COMMITTED = False  # True: check, install, download and run nothing; show the committed receipts (the site's page)

# %% [markdown]
# ## 1. Predict first
#
# Before the lab runs, predict. Each question is about this lab's model, card or settings, most of them changed
# from the lesson's: work each answer out from the lesson's formulas, not its tables. The check compares your
# number with the functions the lesson's predictions come from and says how far off you are, without giving the
# answer away. Write your numbers in `answers` (or `"show"` to see one), then run the check: nothing here needs a
# GPU, vLLM or the sections after it.
#
# __EXERCISES__

# %%
answers = {__ANSWER_SLOTS__}  # your numbers, e.g. {1: 128}; "show" gives an answer and why

# %%
display(Markdown(labnotebook.check_answers(LAB, answers)))

# %% [markdown]
# ## 2. Preflight
#
# The driver, the GPU and its free memory, the free disk where the model goes, and the vLLM and torch
# versions, read before anything is installed or downloaded: the check of
# `python scripts/run_labs.py --check`. One line says what is wrong. With no GPU here and `CPU = False` (or with
# `COMMITTED = True`), the notebook runs nothing: it shows the course's committed receipts of this lab where a
# run's would be.

# %%
facts, problem = ("", None) if COMMITTED else run_labs.preflight(PYTHON)
on_gpu = not COMMITTED and not facts.startswith("no NVIDIA GPU")
RUN = not COMMITTED and (on_gpu or CPU)  # False: no install, no download, no run; committed receipts stand in
if not RUN:
    print(labnotebook.runs_nothing(facts))
else:
    print(facts)
    if problem and problem.startswith(labkit.NOT_INSTALLED) and INSTALL and on_gpu:
        print("vLLM is not installed yet: the next cell installs it")
        problem = None
    if not problem and DOWNLOAD:  # room for every model in the hub's cache on the data disk, less what it holds
        hub = {**os.environ, **autodl.hub_env(HUB)}
        problem = run_labs.download_problem(run_labs.hub_models([LAB], MODEL_ID), hub)
        problem = problem and f"{problem} (downloaded already? then set DOWNLOAD = False)"
    if problem:
        raise labnotebook.Stop(problem)
    print("ok: nothing missing")

# %% [markdown]
# ## 3. Install
#
# vLLM 0.26.0 (a CUDA 13 build) and ModelScope's client, from `requirements-labs-gpu.lock`, into the
# Python that runs the lab. A few minutes, once per machine; `INSTALL = False` skips it.

# %%
if RUN and INSTALL and not CPU:  # the CPU build comes from `make labenv`
    labnotebook.stream([PYTHON, "-m", "pip", "install", "-r", str(ROOT / "requirements-labs-gpu.lock")])

# %% [markdown]
# ## 4. The model
#
# `MODEL_ID`, and any other model the lab script names (a draft model, a quantised checkpoint), from
# ModelScope (or Hugging Face: `HUB = "huggingface"`) into the hub's cache, which this cell puts on the
# data disk with every other cache (vLLM's own downloads too): the system disk is small. The lab then loads
# the same ids and vLLM finds the files there, so its time limit is not spent downloading. The `$` lines are
# the same commands for a terminal (`python scripts/run_labs.py --fetch --lab LAB` runs them all); run
# again, they keep the files already fetched.

# %%
if RUN and not CPU:  # the caches on the data disk, for this download and for what the lab's vLLM fetches
    os.environ.update(autodl.hub_env(HUB))
if RUN and DOWNLOAD:
    for model_id in run_labs.hub_models([LAB], MODEL_ID):
        labnotebook.stream(autodl.download_command(model_id, HUB))

# %% [markdown]
# ## 5. The lab
#
# `python snippets/labs/__LAB__.py --model MODEL --receipt RECEIPT`, started by the course's lab runner:
# its progress and its table stream here, vLLM's own log goes to a file (the line "vLLM's log:" names
# it). It runs in a process of its own, so the GPU is free again when it ends. Without a run (no GPU,
# `CPU = False`) this cell picks the committed receipts instead.

# %% tags=["lab"]
if RUN:
    cpu_max_model_len, cpu_args = run_labs.cpu_args(LAB) if CPU else (None, [])
    receipts = ROOT / (".cache/receipts" if CPU else "receipts")
    receipt_path = Path(RECEIPT) if RECEIPT else receipts / labs.machine_slug(labkit.machine()) / f"{LAB}.json"
    replace = REPLACE or CPU  # CPU receipts go to the scratch folder .cache/receipts/
    if receipt_path.exists() and not replace:
        raise labnotebook.Stop(f"{receipt_path} exists: set REPLACE = True to replace it, or RECEIPT to another path")
    command = run_labs.lab_command(
        LAB,
        PYTHON,
        MODEL,
        receipt_path,
        load_format=LOAD_FORMAT,
        max_model_len=cpu_max_model_len,
        extra=[*cpu_args, "--force"] if replace else cpu_args,
    )
    done = run_labs.run_lab(
        command,
        cpu=CPU,
        timeout_s=TIMEOUT_S,
        echo=lambda line: print(line, end="", flush=True),
        echo_err=lambda line: print(line, end="", file=sys.stderr, flush=True),
    )
    if done["status"] != "ok":
        last = (done["stderr"].strip().splitlines() or ["no output"])[-1]
        raise labnotebook.Stop(f"{LAB} {done['status']} after {done['wall_s']:.0f} s: {last}")
    shown = [labs.load_receipt(receipt_path)]
else:
    shown = labnotebook.committed(LAB)

# %% [markdown]
# ## 6. Against the lesson's prediction
#
# The receipt through the lesson's claims (on a CPU only the exact ones are judged), the prediction for the
# card it ran on (the course's GPU for a CPU run) beside this run's table, and a figure; each committed receipt
# in turn when nothing ran here. To show a new receipt on the lesson page, commit it
# (`receipts/<machine>/__LAB__.json`) and open a pull request.
#
# The figure's first panel puts the lab's main quantity, measured, beside what the lesson predicts for the
# machine that ran it; the number above each pair is measured / predicted. For a count (steps, tokens, blocks,
# bytes) the lesson is exact: anything but 1.00× means it, or the lab, is wrong. For an expected value (an
# average over random choices) it lands near 1. For a time against its floor (on a GPU the registry has, a panel
# of its own) it is how far the machine stays above the physics: a real step pays more than moving its bytes
# (kernel launches and scheduling each step, kernels that reach only part of the datasheet bandwidth);
# [lesson __STEP_MODEL_LESSON__](__STEP_MODEL_URL__) measures both and gives the band a measurement should land
# in. A time below its floor would mean the floor is wrong: please report it. The panels after it are the
# measured columns of the lesson's table.

# %%
if not all([labnotebook.show(receipt) for receipt in shown]):
    raise labnotebook.Stop("a claim of the lesson failed on a receipt: see FAIL above")
