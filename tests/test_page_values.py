"""Pages only look values up: no binding, no arithmetic, no calls in a template; filters fit the unit;
and each lesson's headline values equal hand arithmetic written next to them.
"""

from __future__ import annotations

import re

import jinja2
import jinja2.meta
import pytest
from jinja2 import nodes

from conftest import ROOT
from infercourse import fmt, macros
from infercourse.pages import PAGES, PageValues, values_for

DOCS = ROOT / "docs"
FORMATS = {"count", "fixed", "gb", "gib", "pct", "ms", "tflop", "join"}
UNIT_OF_FORMAT = {"gb": {"B"}, "gib": {"B"}, "ms": {"s"}, "pct": {"1"}, "tflop": {"FLOP"}}
ALLOWED = (
    nodes.Template,
    nodes.Output,
    nodes.TemplateData,
    nodes.Name,
    nodes.Getattr,
    nodes.Getitem,
    nodes.Const,
    nodes.Filter,
    nodes.For,
    nodes.If,
)


def template_problems(page: str, text: str) -> list[str]:
    """What a page template does beyond looking values up and formatting them (empty when nothing).

    Parsed as the build parses it: code blocks and TeX set aside, mkdocs.yml's comment delimiters.
    """
    env = jinja2.Environment(comment_start_string="<!--#", comment_end_string="#-->")
    env.filters.update({name: getattr(fmt, name) for name in FORMATS - {"join"}})
    tree = env.parse(macros.protect(text)[0])
    values = values_for(page)
    problems, loop_names = [], set()
    for node in tree.find_all(nodes.Node):
        kind = type(node).__name__
        if isinstance(node, (nodes.Assign, nodes.AssignBlock)):
            problems.append(f"line {node.lineno}: binds a name ({{% set %}}); put the value in the page's module")
        elif not isinstance(node, ALLOWED):
            problems.append(
                f"line {node.lineno}: {kind} in a template computes; give the result a name in the page's module"
            )
        if isinstance(node, nodes.Filter):
            if node.name not in FORMATS:
                problems.append(f"line {node.lineno}: filter {node.name!r} is not a number format")
            elif isinstance(node.node, nodes.Name) and node.node.name in values and node.name in UNIT_OF_FORMAT:
                unit = values[node.node.name].unit
                if unit not in UNIT_OF_FORMAT[node.name]:
                    problems.append(f"line {node.lineno}: {node.node.name} is in {unit}, not formatted by {node.name}")
        if isinstance(node, nodes.Getitem) and not isinstance(node.arg, nodes.Const):
            problems.append(f"line {node.lineno}: an index that is not a literal computes")
        if isinstance(node, nodes.For):
            for target in (
                node.target.find_all(nodes.Name) if not isinstance(node.target, nodes.Name) else [node.target]
            ):
                if target.name in values or target.name in loop_names:
                    problems.append(f"line {node.lineno}: loop name {target.name!r} is bound twice")
                loop_names.add(target.name)
    undefined = jinja2.meta.find_undeclared_variables(tree) - set(values) - {"page", "config"}
    problems += [f"{name!r} is not a value of this page" for name in sorted(undefined)]
    return problems + exec_block_problems(text)


EXEC_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*\w+\b[^\n]*\bexec=\"(?:on|1|true)\"")
IMPORTS_INFERCOURSE = re.compile(r"^\s*(?:from|import)\s+infercourse\b")


def exec_block_problems(text: str) -> list[str]:
    """Exec blocks (markdown-exec) that import ``infercourse``: a page's one road from Python is its page
    values; an exec block runs a standalone snippet (``--8<--``), which a reader can copy and run."""
    problems, fence, start = [], None, 0
    for n, line in enumerate(text.splitlines(), 1):
        if fence is None:
            opened = EXEC_FENCE.match(line)
            if opened:
                fence, start = opened.group(1), n
        elif line.strip().startswith(fence):
            fence = None
        elif IMPORTS_INFERCOURSE.match(line):
            problems.append(
                f"line {n}: the exec block of line {start} imports infercourse; bind the value in the page's "
                "module (infercourse.pages) and write {{ name }} on the page"
            )
    return problems


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_only_looks_values_up(page):
    problems = template_problems(page, (DOCS / page).read_text(encoding="utf-8"))
    assert not problems, f"{page}:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "planted, expected",
    [
        ("{% set budget = 8192 %}{{ budget | count }}", "binds a name"),
        ("{{ (kappa * 2) | count }}", "computes"),
        ("{{ weights / 2 }}", "computes"),
        ("{{ ridge_point(g4090) }}", "computes"),
        ("{{ s_fit | gb }}", "s_fit is in tokens, not formatted by gb"),
        ("{% for S in contexts %}{{ S }}{% endfor %}", "bound twice"),
        ("{{ nonexistent }}", "not a value of this page"),
        (
            '```python exec="on"\nfrom infercourse.labs import expected_output\nprint(expected_output("phases"))\n```',
            "imports infercourse; bind the value in the page's module",
        ),
        ('~~~py exec="1" html="1"\n  import infercourse.figures\n~~~', "imports infercourse"),
    ],
)
def test_template_check_catches_planted_faults(planted, expected):
    """Each planted fault in lesson 2A's template is reported (the check can fail)."""
    page = "lessons/2a-roofline.md"
    text = (DOCS / page).read_text(encoding="utf-8") + "\n" + planted + "\n"
    assert any(expected in p for p in template_problems(page, text)), template_problems(page, text)


def test_a_value_cannot_be_bound_twice():
    values = PageValues("lessons/x.md")
    values.add("budget", 6.3e9, "B")
    with pytest.raises(ValueError, match="bound twice"):
        values.add("budget", 8192, "tokens")
    with pytest.raises(ValueError, match="unit"):
        values.add("other", 1, "bytes")


def test_a_band_binds_both_ends_low_first():
    values = PageValues("lessons/x.md")
    assert values.add_band("step", (0.014, 0.019), "s") == (0.014, 0.019)
    assert (values._values["step_lo"].value, values._values["step_hi"].value) == (0.014, 0.019)
    with pytest.raises(ValueError, match="low end first"):
        values.add_band("swapped", (0.019, 0.014), "s")


def test_code_and_tex_are_set_aside_and_restored_exactly():
    text = (
        "Text {{ a }}\n\n```bash\necho ${#A[@]} {{ x }}\n```\n\n    ~~~~\n    {% raw %}\n    ~~~~\n\n"
        "TeX \\(x^{{2}} = {{ x }}\\) and \\[ {{ y }} \\] and $$ {% a %} $$.\n"
    )
    protected, kept = macros.protect(text)
    assert "${#" not in protected and "{{ x }}" not in protected and "{{ y }}" not in protected
    assert "{{ a }}" in protected
    assert macros.restore(protected, kept) == text


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_value_of_a_page_is_shown(page):
    """No dead values: a module computes only what its page shows."""
    env = jinja2.Environment(comment_start_string="<!--#", comment_end_string="#-->")
    env.filters.update({name: getattr(fmt, name) for name in FORMATS - {"join"}})
    used = jinja2.meta.find_undeclared_variables(
        env.parse(macros.protect((DOCS / page).read_text(encoding="utf-8"))[0])
    )
    unused = set(values_for(page)) - used
    assert not unused, f"{page}: values its page never shows: {sorted(unused)}"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_no_figure_is_drawn_when_a_page_s_values_are_computed(page):
    """A figure drawn with matplotlib is bound as figures.Drawing(draw), drawn when the page is written: the
    fast tests compute every page's values, and an SVG drawn there costs them seconds (make check's 20 s)."""
    eager = [name for name, v in values_for(page).items() if isinstance(v.value, str) and "<svg" in v.value[:200]]
    assert not eager, f"{page}: {eager} drawn when the values are computed; bind figures.Drawing(<function>) instead"


def test_attention_flops_refuse_mla():
    """DeepSeek-V3 has no head_dim; hidden / heads = 7168 / 128 = 56 is not its key size (128 + 64): refuse."""
    from infercourse import registry, transformer

    with pytest.raises(ValueError, match="MLA"):
        transformer.attention_flops_per_token(registry.model("deepseek-ai/DeepSeek-V3").config, 1024)


def test_facts_used_are_the_registry_s_own_words_by_id():
    from infercourse import registry
    from infercourse.pages import facts_used

    (row,) = facts_used("vllm-block-size")
    # the registry's fact vllm-block-size: 16 tokens per block on CUDA
    assert row["what"] == "tokens per KV-cache block (vLLM on CUDA, FlashAttention)" and row["value"] == "16"
    assert (
        row["source"].endswith("(../facts.md#vllm-block-size) (primary)") or "facts.md#vllm-block-size" in row["source"]
    )
    extra = {"what": "an assumption of this lesson", "value": "1", "source": "here"}
    assert facts_used("vllm-block-size", extra=(extra,))[-1] == extra
    with pytest.raises(KeyError, match=r"no registry fact \['vllm-blok-size'\].*did you mean 'vllm-block-size'\?"):
        facts_used("vllm-blok-size")
    assert registry.VLLM_DEFAULT_BLOCK_SIZE == 16


def test_the_lesson_values_template_runs_as_a_lesson_s_module():
    """templates/lesson_values.py is what a new lesson copies: it must run as one (here as lesson 0A's)."""
    code = (ROOT / "templates" / "lesson_values.py").read_text()
    namespace = {"__name__": "infercourse.pages.lesson_0a"}
    exec(compile(code, "templates/lesson_values.py", "exec"), namespace)
    bound = namespace["P"].values()
    assert {"symbols", "facts_used", "N", "L", "lab_box"} <= set(bound)
    assert bound["L"].value == 28  # Qwen2.5-7B-Instruct's config.json: num_hidden_layers 28
    # the baseline's two facts first (course model, lab card), then the page's own; none twice
    sources = [row["source"] for row in bound["facts_used"].value]
    assert "#model-qwen-qwen2-5-7b-instruct" in sources[0] and "#gpu-rtx-4090" in sources[1]
    assert "#vllm-block-size" in sources[2] and len(sources) == 3
    again = PageValues("lessons/x.md")
    again.facts("gpu-rtx-4090", "vllm-block-size")
    assert len(again.values()["facts_used"].value) == 3


# --- numbers typed into prose (issue 36) --------------------------------------------------------------

TYPED = re.compile(r"(?<![\w.,/-])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w.]\w?)|(?<![\w.,/-])\d+(?:\.\d+)?(?![\w]|\.\d)")
"""A number written in a page's text: ``8,192``, ``0.44``, ``4090``; not one inside a word or a name (``Qwen2.5``,
``H100``, ``fp8_e4m3``, lesson ``2B``), nor a version (``0.26.0``)."""
ALLOWED_LITERALS = (
    (re.compile(r"(19[5-9]\d|20[0-2]\d)"), "a year (1950-2029)"),
    (re.compile(r"\d{4}\.\d{4,5}"), "an arXiv id"),
)
"""What a page may type although it has three digits or a decimal point. Any number of one or two digits
is allowed (counts, list and section numbers, small inputs a problem names); every other number a page
shows is a page value, so that a changed input or formula cannot leave a stale or mistyped copy behind."""
NAMES_WITH_NUMBERS = re.compile(r"\b(?:RTX|GTX|Tesla|RX) \d{3,4}\b|\b\d{3,4}(?= Ti\b)")
"""GPU names spelled with a space before their number (``RTX 4090``): a name, not a quantity."""
PROSE_ONLY = re.compile(
    r"\{\{.*?\}\}|\{%.*?%\}|<!--.*?-->|`[^`\n]*`|\]\([^)\n]*\)|<[^>\n]+>|^\s*--8<--.*$|\ue000\d+\ue001",
    re.S | re.M,
)
"""What is not prose: page values and Jinja tags, comments, inline code, link targets, HTML tags, snippet
lines and the code blocks and TeX :func:`infercourse.macros.protect` set aside."""


def _shown_as(value) -> dict[str, float]:
    """How a page value may appear in prose: its number, and in the units its filters write."""
    v = value.value
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return {}
    shown = {"": float(v)}
    if value.unit == "B":
        shown |= {" | gb": v / 1e9, " | gib": v / 2**30}
    elif value.unit == "s":
        shown |= {" | ms": v * 1e3}
    elif value.unit == "1":
        shown |= {" | pct": v * 100}
    elif value.unit == "FLOP":
        shown |= {" | tflop": v / 1e12}
    return shown


def typed_numbers(page: str, text: str) -> list[str]:
    """Every number typed into a page's prose that should be a page value, as ``page:line: message``:
    the value that already shows it (write ``{{ name }}``), or, when none does, the nearest one."""
    protected, kept = macros.protect(text)
    for i, block in enumerate(kept):  # keep line numbers: a set-aside block becomes its own newlines
        protected = protected.replace(f"\ue000{i}\ue001", "\n" * block.count("\n"), 1)
    prose = PROSE_ONLY.sub(lambda m: "\n" * m.group(0).count("\n") + " ", protected)
    prose = NAMES_WITH_NUMBERS.sub(" ", prose)
    values = {name: _shown_as(v) for name, v in values_for(page).items()}
    problems = []
    for n, line in enumerate(prose.splitlines(), 1):
        for m in TYPED.finditer(line):
            typed = m.group(0)
            digits = typed.replace(",", "").replace(".", "")
            if len(digits) < 3 and "." not in typed:
                continue
            if any(pattern.fullmatch(typed) for pattern, _ in ALLOWED_LITERALS):
                continue
            x = float(typed.replace(",", ""))
            half = 0.5 * 10 ** -len(typed.partition(".")[2])  # what the typed digits round away
            exact = [
                f"{{{{ {name}{how} }}}}"
                for name, shown in values.items()
                for how, y in shown.items()
                if abs(y - x) <= half
            ]
            if exact:
                problems.append(
                    f"{page}:{n}: {typed} is typed; page values equal to it: {', '.join(exact)} (if one is this "
                    f"quantity write it; else compute this one in src/infercourse/pages/{PAGES[page]}.py)"
                )
                continue
            near = sorted(
                (
                    (
                        abs(y - x) / max(abs(x), 1e-12),
                        f"{name}{how} = {y:,.0f}" if abs(y) >= 1000 else f"{name}{how} = {y:.4g}",
                    )
                    for name, shown in values.items()
                    for how, y in shown.items()
                    if y
                ),
            )[:1]
            hint = f" (nearest: {near[0][1]})" if near and near[0][0] < 0.2 else ""
            problems.append(
                f"{page}:{n}: {typed} is typed and no page value shows it{hint}; compute it in "
                f"src/infercourse/pages/{PAGES[page]}.py and write {{{{ name }}}}"
            )
    return problems


LESSON_PAGES = sorted(page for page, module in PAGES.items() if module.startswith("lesson_"))


@pytest.mark.parametrize("page", LESSON_PAGES)
def test_no_number_is_typed_into_a_lesson_s_prose(page):
    problems = typed_numbers(page, (DOCS / page).read_text(encoding="utf-8"))
    assert not problems, "numbers typed into the prose (a page shows page values):\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "prose, expected",
    [
        ("Each token costs 57,344 B of cache.", "57,344 is typed; page values equal to it: {{ kappa }}"),  # a copy
        ("The cache holds 110,106 tokens.", "110,106 is typed and no page value shows it (nearest: tokens = 110,160)"),
        ("A ratio of 0.44 here.", "0.44 is typed"),  # a decimal of any size
        ("We run 2048 tokens.", "2048 is typed"),  # four digits that are not a year
    ],
)
def test_a_typed_number_is_found_with_the_page_value_it_should_be(prose, expected):
    """Planted in lesson 1A, whose page shows kappa = 2 x 28 layers x 4 KV heads x 128 x 2 B = 57,344 B/token
    and a KV capacity of 110,160 tokens (the second: two digits swapped)."""
    problems = typed_numbers("lessons/1a-kv-cache.md", prose)
    assert len(problems) == 1 and expected in problems[0], problems


def test_what_a_page_may_type_is_not_reported():
    prose = (
        "In 2023 (arXiv 2309.06180) vLLM 0.26.0 on an RTX 4090 ran 3 steps of 64 sequences for Qwen2.5-7B's "
        "H100 numbers, lesson 2B, `8,192` in code, {{ tokens | count }} from the page, \\(128\\kappa\\) in TeX.\n"
        "```bash\nvllm serve --max-model-len 8192\n```\n"
    )
    assert typed_numbers("lessons/1a-kv-cache.md", prose) == []
