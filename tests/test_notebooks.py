"""The lab notebooks (docs/notebooks/<lab>.ipynb): generated from the scripts, never edited by hand; their
cells; the AutoDL paths and commands they use; their pages on the built site.

That each notebook runs top to bottom on vLLM's CPU engine and keeps its lesson's claims is
tests/test_labs.py's job (it runs every lab through its notebook).
"""

from __future__ import annotations

import ast
import json
import math
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from test_browser import browser  # noqa: F401  (the Playwright browser fixture)

from conftest import NOTEBOOKS, ROOT, load_hook, load_script, phases_receipt, run_notebook
from infercourse import autodl, course, labbox, labnotebook, labs
from infercourse.exercises import Exercise

make_notebooks = load_script("make_notebooks")

LABS = labs.wired()


# --- generated, never hand-edited ----------------------------------------------------------------------


def test_every_committed_notebook_is_what_the_generator_makes():
    assert make_notebooks.problems() == []


def _number_constants(script: Path) -> set[str]:
    """The script's module constants bound to a number or a tuple of numbers (``REQUESTS = 256``)."""
    found = set()
    for node in ast.parse(script.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            flat = repr(value).replace("(", "").replace(")", "").replace(",", " ").split()
            if flat and all(re.fullmatch(r"-?[\d.e+-]+", v) for v in flat):  # numbers only, at any depth
                found.add(node.targets[0].id)
    return found


@pytest.mark.parametrize("lab", LABS)
def test_notebook_text_shows_values_not_the_scripts_constant_names(lab):
    # the reader saw "REQUESTS requests of PROMPT_TOKENS random tokens" where 4A's script has REQUESTS = 256
    names = _number_constants(labs.LABS_DIR / f"{lab}.py")
    cells = nbformat.read(NOTEBOOKS / f"{lab}.ipynb", as_version=4).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert [n for n in sorted(names) if re.search(rf"\b{n}\b", text)] == []


def test_notebook_links_its_lesson_as_the_markdown_file_jupyterlab_opens():
    for lab in LABS:
        page = make_notebooks.lessons_by_lab()[lab]["page"]
        assert f"](../{page})" in nbformat.read(NOTEBOOKS / f"{lab}.ipynb", as_version=4).cells[0].source
        assert (NOTEBOOKS / ".." / page).is_file()


def test_the_check_sees_a_hand_edited_a_missing_and_a_stray_notebook(tmp_path):
    for lab in LABS:
        shutil.copy(NOTEBOOKS / f"{lab}.ipynb", tmp_path)
    assert make_notebooks.problems(tmp_path) == []
    edited = json.loads((tmp_path / "phases.ipynb").read_text())
    edited["cells"][2]["source"][0] = 'MODEL_ID = "Qwen/Qwen2.5-0.5B-Instruct"\n'
    (tmp_path / "phases.ipynb").write_text(json.dumps(edited, indent=1) + "\n")
    (tmp_path / "weights.ipynb").unlink()
    (tmp_path / "scratch.ipynb").write_text("{}")
    found = make_notebooks.problems(tmp_path)
    assert len(found) == 3, found
    assert "phases.ipynb is stale or hand-edited" in found[0] and "make notebooks" in found[0]
    assert "weights.ipynb is missing" in found[1]
    assert "scratch.ipynb is no lab's notebook" in found[2]


def test_a_notebook_is_generated_from_its_script(tmp_path):
    """The script's docstring is the notebook's account of the lab; the same inputs give the same bytes."""
    nb = nbformat.reads(make_notebooks.notebook("phases"), as_version=4)
    nbformat.validate(nb)
    assert make_notebooks.notebook("phases") == make_notebooks.notebook("phases")
    assert "Lab 0A: see prefill and decode as two phases" in nb.cells[0].source
    assert [cell.id for cell in nb.cells] == [f"phases-{i}" for i in range(len(nb.cells))]
    assert nb.metadata.kernelspec.name == "python3"


def test_a_placeholder_without_a_value_is_refused():
    with pytest.raises(ValueError, match="__LAB_GPU__"):
        make_notebooks.notebook("phases", template="# %%\nX = '__LAB_GPU__'\n")


@pytest.mark.parametrize("lab", LABS)
def test_a_notebook_s_cells_are_the_template_s(lab):
    """Title first (the page title), then predictions, preflight, install, model, lab, comparison, in that order;
    one cell tagged "parameters" (papermill), one tagged "lab" (tests/test_labs.py reads its output)."""
    nb = nbformat.read(NOTEBOOKS / f"{lab}.ipynb", as_version=4)
    lesson = make_notebooks.lessons_by_lab()[lab]
    headings = [
        line
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if line[:2] == "# "
    ]
    assert headings == [f"# Lab notebook {lesson['code']} · {lesson['title']}"]
    sections = re.findall(r"^## (\d\. .+)$", "\n".join(c.source for c in nb.cells if c.cell_type == "markdown"), re.M)
    assert sections == [
        "1. Predict first",
        "2. Preflight",
        "3. Install",
        "4. The model",
        "5. The lab",
        "6. Against the lesson's prediction",
    ]
    tags = [tag for cell in nb.cells for tag in cell.metadata.get("tags", [])]
    assert sorted(tags) == ["lab", "parameters"]
    assert not any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), "committed without outputs"
    assert f'LAB = "{lab}"' in "".join(cell.source for cell in nb.cells)


# --- on the site: in the nav, linked from the lab box --------------------------------------------------


def test_every_lab_with_a_lesson_has_a_notebook_in_the_nav_and_its_lab_box_links_it():
    (entry,) = course.notebook_nav()
    pages = [page for item in entry["Lab notebooks"] for page in item.values()]
    assert sorted(pages) == sorted(f"notebooks/{lab}.ipynb" for lab in make_notebooks.lessons_by_lab())
    assert sorted(make_notebooks.lessons_by_lab()) == LABS
    box = labbox.lab_box("phases.py")
    assert "[Lab notebook 0A](../notebooks/phases.ipynb)" in box


# --- AutoDL paths and commands ---------------------------------------------------------------------------


def test_autodl_paths_and_commands():
    # the download goes into the hub's cache (no --local-dir), so the lab loads the hub id
    assert autodl.download_command("Qwen/Qwen2.5-7B-Instruct") == ["modelscope", "download", "Qwen/Qwen2.5-7B-Instruct"]
    assert autodl.download_command("Qwen/Qwen2.5-7B-Instruct", "huggingface")[:2] == ["hf", "download"]
    assert autodl.hub_env("modelscope")["VLLM_USE_MODELSCOPE"] == "True"
    assert "VLLM_USE_MODELSCOPE" not in autodl.hub_env("huggingface")
    assert all(v.startswith(autodl.DATA_DISK + "/") for v in autodl.hub_env("huggingface").values())
    with pytest.raises(ValueError, match="not one of modelscope, huggingface"):
        autodl.download_command("Qwen/Qwen2.5-7B-Instruct", "github")
    with pytest.raises(ValueError, match="is not 'owner/name'"):
        autodl.download_command("Qwen2.5-7B-Instruct")


def test_disk_problem_is_one_line_in_gb(tmp_path):
    assert autodl.disk_problem(tmp_path / "not" / "yet", 1) is None  # 1 byte: any disk has it
    free = shutil.disk_usage(tmp_path).free
    line = autodl.disk_problem(tmp_path / "model", free + 10**15)  # a petabyte more than is free
    assert line is not None and "\n" not in line
    assert f"{free / 1e9:.1f} GB free" in line and autodl.DATA_DISK in line


def test_a_stop_shows_one_line_in_jupyter():
    assert labnotebook.Stop("driver 550.54 is older than 580")._render_traceback_() == [
        "error: driver 550.54 is older than 580"
    ]


# --- the built pages (a build test: marked by its `site` fixture) ---------------------------------------


def test_search_finds_a_notebook_by_its_words_not_its_code(site: Path):
    # the reader's "TTFT" search showed "Lab notebook 0B / Copied! / import os / import sys"
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    entries = [e for e in index["docs"] if e["location"].startswith("notebooks/")]
    assert entries
    assert [e["location"] for e in entries if "import sys" in e["text"] or "Copied!" in e["text"]] == []
    assert any("as a notebook for JupyterLab" in e["text"] for e in entries)  # the markdown cells stay


def test_a_notebook_page_loads_nothing_from_elsewhere_and_offers_its_ipynb(site: Path):
    for lab in LABS:
        page = site / "notebooks" / lab / "index.html"
        html = page.read_text(encoding="utf-8")
        assert "cdnjs" not in html and '<script src="">' not in html, f"{page}: a CDN loader is left"
        loads = re.findall(r'<script[^>]+src="[^"]*"|<link[^>]+rel="(?:stylesheet|preload|modulepreload)"[^>]*>', html)
        assert not [tag for tag in loads if re.search(r'(?:src|href)="(?:https?:)?//', tag)], page
        assert "import(" not in html and "@import" not in html, page
        assert f'<a href="{lab}.ipynb" download>' in html
        assert (site / "notebooks" / lab / f"{lab}.ipynb").read_bytes() == (NOTEBOOKS / f"{lab}.ipynb").read_bytes()


# --- the comparison cell: table and figure from a receipt --------------------------------------------


def test_the_figure_opens_with_the_prediction_met_then_each_measured_column_and_on_a_gpu_the_floor():
    import matplotlib

    matplotlib.use("Agg")
    # phases: its compare panel (engine steps), then its table's measured columns ttft_ms, tpot_ms, decode_s
    cpu = labnotebook.figure(phases_receipt(kind="cpu"))
    # steps n x 3 repeats, all as predicted: said once in the title, not above each of the 5 pairs
    titles = [
        "engine steps (3 runs): measured and prediction\n(all 5 as predicted: 1.00×)",
        "ttft_ms",
        "tpot_ms",
        "decode_s",
    ]
    assert [ax.get_title() for ax in cpu.axes if ax.get_visible()] == titles and len(cpu.axes[0].texts) == 0
    off = phases_receipt(kind="cpu")
    off["results"][4]["engine_steps"] = 3 * 129  # one row off: every pair's ratio is written, 129 / 128 = 1.0078
    assert [t.get_text() for t in labnotebook.figure(off).axes[0].texts] == ["1.00×"] * 4 + ["1.01×"]
    # an RTX 4090 is in the registry: one more panel after the prediction's, measured beside the roofline floor
    gpu = labnotebook.figure(phases_receipt(kind="gpu"))
    panels = [ax for ax in gpu.axes if ax.get_visible()]
    # TPOT beside its floor, every row: the tpot_ms column is not drawn again
    assert [ax.get_title() for ax in panels[1:]] == ["TPOT: measured and floor", "ttft_ms", "decode_s"]
    assert [len(bars) for bars in panels[1].containers] == [5, 5]
    # measured / floor above each pair: TPOT 17.0 ms over (14,141,238,272 + 57,344 x 144) B / 1.008e12 = 14.0372 ms
    # (mean context 128 + 32 / 2) = 1.2111; the last row, 17.5 ms over 14.2657 ms (context 4,160) = 1.2267
    ratios = [t.get_text() for t in panels[1].texts]
    assert len(ratios) == 5 and (ratios[0], ratios[-1]) == ("1.21×", "1.23×")


def test_the_caption_says_what_the_figure_draws():
    caption = labnotebook.caption(phases_receipt(kind="cpu"))
    assert caption.startswith("AMD EPYC (cpu), bars named by row (prompt_tokens output_tokens): ")
    assert (
        "engine steps (3 runs) measured beside the lesson's prediction (exact) in 5 rows, all as predicted; " in caption
    )
    assert caption.endswith("; ttft_ms (ms); tpot_ms (ms); decode_s (s).")


def test_the_comparison_puts_the_prediction_beside_this_run():
    text = labnotebook.comparison(phases_receipt(kind="cpu"))
    assert text.startswith("**Prediction for the RTX 4090 from ")
    assert "**This run** (" in text and "A CPU run of " in text and "**Measured (committed receipts).**" not in text
    this_run = text.split("**This run**")[1]
    assert this_run.count("\n| ") == 1 + 5  # its header, then the receipt's 5 rows (the separator starts "|-")


def _notebook_html(markdown: str) -> str:
    """A one-cell notebook rendered by nbconvert's lab template, as mkdocs-jupyter renders the site's notebooks."""
    from nbconvert import HTMLExporter

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(markdown)]
    return HTMLExporter(template_name="lab").from_notebook_node(notebook)[0]


def test_a_notebook_s_formulas_reach_katex_as_the_lessons_do():
    notebooks, math = load_hook("notebooks"), load_hook("math")
    html = notebooks.typeset_cells(_notebook_html(r"Inline $x^2$, display $$\frac{a}{b} = c$$, `$HOME`, $5 and $6."))
    formulas = [math._formula(m) for m in math.FORMULA.finditer(html)]
    assert formulas == [("x^2", False), (r"\frac{a}{b} = c", True)]  # what math.py hands KaTeX: TeX, display?
    assert "<code>$HOME</code>" in html and "$5 and $6." in html  # code and prices are not math


def test_a_notebook_cell_with_the_lessons_delimiters_is_refused():
    notebooks = load_hook("notebooks")
    cell = {"cell_type": "markdown", "source": ["the floor \\(t = W / \\beta\\)"]}
    with pytest.raises(Exception, match=r"notebooks/x.ipynb, cell 2: .* write it \$\.\.\.\$"):
        notebooks.check_cells({"cells": [{"cell_type": "code", "source": ["x = 1"]}, cell]}, "notebooks/x.ipynb")
    notebooks.check_cells({"cells": [{"cell_type": "markdown", "source": ["`\\(` in code is fine"]}]}, "x")


def test_a_notebook_link_to_a_missing_page_or_anchor_fails_the_build(tmp_path):
    from types import SimpleNamespace

    notebooks = load_hook("notebooks")
    html = _notebook_html(
        "[ok](../lessons/0a-prefill-decode.md#lab) [no page](../lessons/9z-nothing.md) "
        "[no anchor](../lessons/0a-prefill-decode.md#no-such-section)"
    )
    page = SimpleNamespace(file=SimpleNamespace(src_uri="notebooks/x.ipynb", abs_src_path=str(tmp_path / "x.ipynb")))
    (tmp_path / "x.ipynb").write_text(json.dumps({"cells": []}))
    notebooks.on_page_content(html, page, None, None)
    built = tmp_path / "site" / "lessons" / "0a-prefill-decode" / "index.html"
    built.parent.mkdir(parents=True)
    built.write_text('<h2 id="lab">Lab</h2>')
    config = SimpleNamespace(site_dir=str(tmp_path / "site"), docs_dir=str(ROOT / "docs"))
    with pytest.raises(Exception) as failed:
        notebooks.on_post_build(config)
    message = str(failed.value)
    assert "notebooks/x.ipynb links lessons/9z-nothing.md, which is not a page of the site" in message
    assert "links lessons/0a-prefill-decode.md#no-such-section, an anchor that page does not have" in message
    assert "#lab" not in message


def test_an_answer_is_right_off_shown_or_not_yet():
    """Lab 0A's first exercise (one request of n = 64 output tokens alone: 64 recorded steps, by hand) as a reader
    answers it: exactly right; one step short (-2 %: 63 / 64 - 1 = -1.6 %) without the answer; "show"; nothing
    yet; not a number."""
    check = {
        answer: labnotebook.check_answers("phases", {1: answer}).splitlines()[0]
        for answer in (64, 63, "show", None, "64", True)
    }
    assert check[64].startswith("1. right: 64 steps. One recorded step per output token")
    assert (
        check[63]
        == '1. not quite: 63 steps is -2% off the course\'s model (a count: exactly); think again, or write "show"'
    )
    assert check["show"].startswith("1. the answer is 64 steps. One recorded step")
    assert check[None].startswith("1. not answered yet: write your number as `answers[1]`")
    assert (
        check["64"]
        == check[True].replace("True", "'64'")
        == "1. `answers[1]` is '64': write a number (in steps), or \"show\""
    )
    # within a ratio's tolerance (5 %): 4 is right for 0A's TTFT growth (4.186), 4.5 is not (+8 %)
    assert labnotebook.check_answers("phases", {2: 4}).splitlines()[1].startswith("2. right: 4.186 times.")
    assert "+8% off" in labnotebook.check_answers("phases", {2: 4.5}).splitlines()[1]
    assert all("not answered yet" in line for line in labnotebook.check_answers("phases", {}).splitlines())
    with pytest.raises(ValueError, match=r"rel_tol is a fraction in \[0, 1\), got 5"):
        Exercise("q", lambda: 1.0, "steps", "why", rel_tol=5)


def test_without_a_gpu_or_vllm_a_notebook_shows_the_committed_receipts():
    """No GPU here and this environment has no vLLM: with CPU = False lab 0A's notebook installs, downloads and runs
    nothing, yet runs top to bottom, its last cell showing the committed CPU reference (receipts/<cpu>/phases.json)
    through the lesson's claims, beside the prediction, with its figure."""
    done = run_notebook("phases", {"CPU": False, "INSTALL": False, "DOWNLOAD": False}, timeout_s=300)
    assert done["ok"], done["error"]
    committed = labs.committed_receipts("phases")
    assert committed and done["outputs"][-1].count("display_data") == 3 * len(committed), done["outputs"][-1]
    assert done["stdout"] == "" and done["stderr"] == ""  # the lab cell ran nothing


@pytest.mark.parametrize("lab", LABS)
def test_every_lab_asks_for_predictions_its_notebook_lists(lab):
    """Issue 34: two or three exercises per lab, each answer a finite number computed without vLLM or a GPU, listed
    in the notebook's "Predict first" section with a slot per exercise in `answers`."""
    found = labs.spec(lab).exercises
    assert 2 <= len(found) <= 3, f"{lab}: {len(found)} exercises"
    assert all(math.isfinite(e.answer()) for e in found)
    nb = nbformat.read(NOTEBOOKS / f"{lab}.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in nb.cells)
    assert all(e.question in text for e in found)
    assert "answers = {" + ", ".join(f"{k}: None" for k in range(1, len(found) + 1)) + "}" in text


# --- the site's page of a notebook: the notebook run on the committed receipts ---------------------------------


def test_a_notebook_page_shows_its_run_on_the_committed_receipts(site: Path):
    """Issue 34: each notebook's page shows its outputs (run with COMMITTED = True): the check of the reader's
    answers, the claims report of each committed receipt, and its figure with the caption as its text alternative.
    (The download stays the repository's notebook, without outputs: the test above compares the bytes.)"""
    for lab in LABS:
        html = (site / "notebooks" / lab / "index.html").read_text(encoding="utf-8")
        assert "COMMITTED = True: nothing is installed" in html, lab
        assert "not answered yet: write your number as <code>answers[1]" in html, lab  # the check of the answers
        receipts = labs.committed_receipts(lab)
        images = re.findall(
            r'<img alt="([^"]*)"[^>]*src="(output-\d+\.png)" width="\d+" height="\d+" loading="lazy"', html
        )
        assert len(images) == len(receipts), (lab, len(images))
        assert all((site / "notebooks" / lab / png).read_bytes().startswith(b"\x89PNG") for _, png in images)
        images = [alt for alt, _ in images]
        assert [alt.split(", bars named by row")[0] for alt in images] == [
            f"{r['machine']['name']} ({r['machine']['kind']})" for r in receipts
        ]
        assert html.count(f"{lab} on ") >= len(receipts), lab  # each receipt's claims report


def _image_page(*outputs) -> str:
    """A one-cell notebook whose code cell shows ``outputs`` (Markdown text, or ``None`` for a PNG), rendered by
    nbconvert's lab template as mkdocs-jupyter renders the site's notebooks."""
    from nbconvert import HTMLExporter

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    cell = nbformat.v4.new_code_cell("show()")
    cell.outputs = [
        nbformat.v4.new_output("display_data", {"image/png": png} if text is None else {"text/markdown": text})
        for text in outputs
    ]
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [cell]
    return HTMLExporter(template_name="lab").from_notebook_node(notebook)[0]


def test_a_figure_s_caption_is_its_text_alternative_and_one_without_fails_the_build(tmp_path):
    from types import SimpleNamespace

    notebooks = load_hook("notebooks")
    (tmp_path / "x.ipynb").write_text(json.dumps({"cells": []}))
    page = SimpleNamespace(file=SimpleNamespace(src_uri="notebooks/x.ipynb", abs_src_path=str(tmp_path / "x.ipynb")))
    html = notebooks.on_page_content(_image_page('Figure: steps "as predicted" & more.', None), page, None, None)
    assert '<img alt="steps &quot;as predicted&quot; &amp; more."' in html
    with pytest.raises(Exception, match="notebooks/x.ipynb: an output image has no 'Figure: ' line before it"):
        notebooks.on_page_content(_image_page("A table.", None), page, None, None)


def test_the_site_s_runs_are_kept_by_the_content_they_read(tmp_path):
    """hooks/notebook_outputs.py keys a run on what the notebook reads: a copy with new dates reuses it, an
    edited receipt or missing test models do not."""
    import os

    outputs = load_hook("notebook_outputs")
    for folder in {*outputs.READ, "receipts"}:  # receipts/ whatever READ says: the edit below must change the key
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for config in ROOT.glob(outputs.MODEL_CONFIGS):
        (tmp_path / config.relative_to(ROOT)).parent.mkdir(parents=True)
        shutil.copy2(config, tmp_path / config.relative_to(ROOT))
    assert outputs.inputs_digest(tmp_path) == outputs.inputs_digest(ROOT)
    receipt = next((tmp_path / "receipts").rglob("phases.json"))
    os.utime(receipt, (0, 0))
    assert outputs.inputs_digest(tmp_path) == outputs.inputs_digest(ROOT)
    receipt.write_text(receipt.read_text(encoding="utf-8").replace('"repeats": 5', '"repeats": 6'), encoding="utf-8")
    assert outputs.inputs_digest(tmp_path) != outputs.inputs_digest(ROOT)
    receipt.write_bytes(next((ROOT / "receipts").rglob("phases.json")).read_bytes())
    assert outputs.inputs_digest(tmp_path) == outputs.inputs_digest(ROOT)
    page = tmp_path / "src" / "infercourse" / "pages" / "lesson_0a.py"  # no notebook reads a page's values
    page.write_text(page.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert outputs.inputs_digest(tmp_path) == outputs.inputs_digest(ROOT)
    shutil.rmtree(tmp_path / ".cache" / "models")  # a build before `make testmodels`: the claims' n/a differ
    assert outputs.inputs_digest(tmp_path) != outputs.inputs_digest(ROOT)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_notebook_page_passes_axe_and_fits_a_phone(browser, server, scheme):  # noqa: F811
    """The notebook pages' own stylesheet is cut to what each page uses (hooks/notebooks.py, used_css): axe-core
    finds nothing in the notebook (contrast of the highlighted code included), and at 390 px nothing but a marked
    scroll box is wider than the screen. Lab 6A's notebook: the longest claims report and a 12-row figure."""
    from test_browser import _open

    context, page, watch = _open(browser, 390, 844, scheme)
    page.goto(server + "/notebooks/spec_decode/", wait_until="load")
    assert page.evaluate("getComputedStyle(document.querySelector('.clipboard-copy-txt')).display") == "none"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    # the download link's icon is a letter high (it was an unsized SVG: 358 px on a phone, 688 px on a laptop)
    assert page.evaluate("document.querySelector('.nb-download svg').getBoundingClientRect().height") < 32
    # on a laptop every output table fits its box (Material's 5rem header cells cut the last columns)
    page.set_viewport_size({"width": 1280, "height": 900})
    cut = """[...document.querySelectorAll('.jupyter-wrapper .jp-OutputArea-output table')]
        .map(t => (t.closest('.md-typeset__scrollwrap') || t.parentElement))
        .map(box => box.scrollWidth - box.clientWidth)"""
    assert page.evaluate(cut) == [0, 0], page.evaluate(cut)  # lab 6A's prediction and this run's table
    page.set_viewport_size({"width": 390, "height": 844})
    page.add_script_tag(path=str(ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"))
    found = page.evaluate(
        "async () => (await axe.run('.jupyter-wrapper')).violations"
        ".map(v => `${v.id}: ${v.help} (${v.nodes.length}: ${v.nodes[0].target})`)"
    )
    assert not found, found
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


def test_a_notebook_page_keeps_only_the_css_it_uses():
    notebooks = load_hook("notebooks")
    css = (
        ".w{--used: var(--deep); --deep: red; --unused: blue}"  # --deep is read only through --used
        ".w .cell{color: var(--used)}.w .absent{color: var(--unused)}"
        ".w :is(.cell, .other):hover{margin: 0}"  # a comma inside :is() does not split the selector
        ".w .cell:not(.absent){padding: 1px}"  # what :not() names need not be on the page
        "[data-md-color-scheme=slate] .w{--used: white}"  # the theme's attribute is on <body>, not in the content
        ".w :root{--icon: url(x)}"  # never matches
        "@media print{.w .cell{display: none}.w .absent{display: none}}"
    )
    kept = notebooks.used_css(css, '<div class="w"><p class="cell">x</p></div>')
    assert kept == (
        ".w{--used:var(--deep);--deep:red}.w .cell{color:var(--used)}.w :is(.cell, .other):hover{margin:0}"
        ".w .cell:not(.absent){padding:1px}[data-md-color-scheme=slate] .w{--used:white}"
        "@media print{.w .cell{display:none}}"
    )


def test_the_comparison_predicts_for_the_card_the_receipt_was_measured_on():
    """A receipt from an H200 (in the registry) is put beside the prediction for the H200: the phases floor's
    bandwidth there is 4,800 GB/s (registry, the H200 SXM datasheet), not the RTX 4090's 1,008 GB/s. A lab whose
    prediction is the same on every card (weights: bytes) keeps the course's GPU; a card the registry lacks too."""
    h200 = phases_receipt(kind="gpu")
    h200["machine"] = {**h200["machine"], "name": "NVIDIA H200"}
    text = labnotebook.comparison(h200)
    assert text.startswith("**Prediction for the H200 SXM from the roofline") and "4,800 GB/s" in text
    assert labs.prediction_for(labs.spec("weights"), "H200").startswith("**Prediction for the RTX 4090 ")
    unknown = phases_receipt(kind="gpu")
    unknown["machine"] = {**unknown["machine"], "name": "NVIDIA B200"}
    assert labs.receipt_gpu(unknown) is None and labnotebook.comparison(unknown).startswith("**Prediction for the RTX")
    with pytest.raises(KeyError, match="unknown GPU 'B200'"):
        labs.prediction_for(labs.spec("phases"), "B200")
