"""Pages only look values up: no binding, no arithmetic, no calls in a template; filters fit the unit;
and each lesson's headline values equal hand arithmetic written next to them."""

from __future__ import annotations

import math
import re

import jinja2
import jinja2.meta
import pytest
from jinja2 import nodes

from conftest import ROOT
from infercourse import fmt, macros
from infercourse.pages import PAGES, PageValues, values_for

DOCS = ROOT / "docs"
FORMATS = {"count", "fixed", "gb", "gib", "pct", "ms", "join"}
UNIT_OF_FORMAT = {"gb": {"B"}, "gib": {"B"}, "ms": {"s"}, "pct": {"1"}}
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


def test_code_and_tex_are_set_aside_and_restored_exactly():
    text = (
        "Text {{ a }}\n\n```bash\necho ${#A[@]} {{ x }}\n```\n\n    ~~~~\n    {% raw %}\n    ~~~~\n\n"
        "TeX \\(x^{{2}} = {{ x }}\\) and \\[ {{ y }} \\] and $$ {% a %} $$.\n"
    )
    protected, kept = macros.protect(text)
    assert "${#" not in protected and "{{ x }}" not in protected and "{{ y }}" not in protected
    assert "{{ a }}" in protected
    assert macros.restore(protected, kept) == text


# --- Headline values against hand arithmetic -------------------------------------------------------
# Qwen2.5-7B-Instruct config: L = 28, d = 3584, h = 28, h_kv = 4, d_h = 128, f = 18944, V = 152064, untied.
# N = 2*V*d + 28*(3584*3584*2 + 2*3584*512 + 3584 + 2*512 + 3*3584*18944 + 2*3584) + 3584
#   = 1,089,994,752 + 28*(25,690,112 + 3,670,016 + 4,608 + 203,685,888 + 7,168) + 3,584 = 7,615,616,512.
N_QWEN = 7_615_616_512
KAPPA = 2 * 28 * 4 * 128 * 2  # 57,344 B per token
M_QWEN = N_QWEN - 152064 * 3584  # 7,070,619,136: all but the input embedding


def _v(page: str, name: str):
    return values_for(page)[name].value


def test_lesson_0a_headline_values():
    page = "lessons/0a-prefill-decode.md"
    assert _v(page, "kappa") == KAPPA
    assert _v(page, "crossover") == pytest.approx(N_QWEN * 2 / KAPPA)  # 265,611.6 tokens
    # decode at 1,024 tokens: 2N / (2N + 1024 kappa) = 15,231,233,024 / 15,289,953,280 = 0.99616
    assert _v(page, "dec1k") == pytest.approx(0.99616, abs=1e-5)
    # with attention: (2N + 4*28*28*128*8192) / (2N + 8192 kappa) = 18,519,384,064 / 15,700,995,072 = 1.1795
    assert _v(page, "dec_att_8k") == pytest.approx(1.1795, abs=1e-4)
    # decode floor at S = 1: M*2 B / 1008e9 B/s = 14,141,238,272 / 1.008e12 = 14.029 ms (+ 57 KB of cache, 0.06 us)
    assert _v(page, "matmul_bytes") == 2 * M_QWEN
    assert _v(page, "tpot_floor_1") == pytest.approx(14.029e-3, abs=1e-6)
    # all weights: 15,231,233,024 / 1.008e12 = 15.110 ms
    assert _v(page, "all_weights_time") == pytest.approx(15.110e-3, abs=1e-6)
    # the lab box's cache is max_model_len = 8,192 tokens, not the grid's longest request (4,096 + 128)
    assert _v(page, "lab_max_model_len") == 8192 and _v(page, "lab_longest_request") == 4224
    # (15,231,233,024 + 8192 * 57,344 + 2 * 2^30) / 0.92 / 2^30 = 18.08 GiB
    assert "**Minimum VRAM:** 18.1 GiB" in _v(page, "lab_box")


def test_lesson_0b_headline_values():
    page = "lessons/0b-metrics.md"
    # 2NS's excess 4Vd per token: 4 * 544,997,376 / (2 * 7,615,616,512) = 14.3 % of 2NS;
    # against the exact count 2N - 4Vd: 2,179,989,504 / 5,435,627,008 = 16.7 % too high
    assert _v(page, "prefill_overcount_of_2n") == pytest.approx(0.1431, abs=1e-4)
    assert _v(page, "prefill_overcount_of_exact") == pytest.approx(0.1671, abs=1e-4)
    # request C: arrives 100 ms, tokens at 400, 430, 460, 610, 640: TTFT 300, TPOT 240/4 = 60, E2E 540
    assert (_v(page, "c_ttft"), _v(page, "c_tpot"), _v(page, "c_e2e")) == (300, 60, 540)
    # goodput break-even: 4/6 of requests must meet the SLO, so more than 1/3 missing lowers it
    assert _v(page, "q4_break_even_miss") == pytest.approx(1 / 3)


def test_lesson_0c_headline_values():
    page = "lessons/0c-transformer.md"
    assert _v(page, "N") == N_QWEN and _v(page, "M") == M_QWEN
    # attention at 8,192: 4 * 28 * 28 * 128 * 8192 = 3,288,334,336 FLOPs; / 2M = 23.25 %
    assert _v(page, "att8k") == 3_288_334_336
    assert _v(page, "att8k_share") == pytest.approx(3_288_334_336 / (2 * M_QWEN))
    # AWQ per quantised weight: 0.5 + 2/128 + 0.5/128 = 0.51953125 B
    assert _v(page, "awq_per_weight") == 0.51953125
    # 24,564 MiB * 0.92 = 23,696,432,087 B budget; minus 15,231,233,024 B of weights = 7.88 GiB
    assert _v(page, "left_bf16") == pytest.approx(24564 * 2**20 * 0.92 - 2 * N_QWEN)


def test_lesson_1a_headline_values():
    page = "lessons/1a-kv-cache.md"
    # budget: 24,564 MiB * 0.92 - 15,231,233,024 - 2 GiB = 25,757,220,864 * 0.92 - 15,231,233,024 - 2,147,483,648
    #       = 23,696,643,194.88 - 17,378,716,672 = 6,317,926,522.88 B (6.32 GB)
    assert _v(page, "kv_budget") == pytest.approx(6_317_926_522.88)
    # tokens: floor(6,317,926,522.88 / (57,344 * 16)) * 16 = floor(6885.2) * 16 = 6,885 * 16 = 110,160
    assert _v(page, "tokens") == 110_160
    assert _v(page, "tokens_fp8") == 220_336  # floor(6,317,926,522.88 / (28,672 * 16)) = 13,771 blocks
    # DeepSeek-V3 MLA: 61 * (512 + 64) * 2 = 70,272 B per token
    assert _v(page, "kappa_ds") == 70_272


def test_lesson_2a_headline_values():
    page = "lessons/2a-roofline.md"
    # the KV budget on the RTX 4090 is lesson 1A's: 6,317,926,522.88 B = 6.32 GB (the page once printed 0.00 GB)
    assert _v(page, "kv_budget") == pytest.approx(6_317_926_522.88)
    # ridge: 165.2e12 / 1008e9 = 163.89 FLOP/B; B* = 163.89 * 2 / 2 = 163.89 -> 164 sequences
    assert _v(page, "r4090") == pytest.approx(163.889, abs=1e-3) and _v(page, "bstar_n") == 164
    # 4,096-token sequences that fit: 6,885 blocks // ceil(4096 / 16) = 6,885 // 256 = 26 (the page once printed 0)
    assert _v(page, "fit_4k") == 26
    # H200: ridge 989e12 / 4800e9 = 206.04, so B* rounds UP to 207
    h200 = next(row for row in _v(page, "capacity_rows") if row["name"] == "H200 SXM")
    assert h200["bstar_n"] == 207 and math.isclose(h200["ridge"], 206.0417, abs_tol=1e-4)
    # vLLM 0.26.0 defaults with LLM(...) on a card under 70 GiB: 8,192 tokens, 256 sequences; from
    # B = 32 the prompts (32 * 512 = 16,384 tokens) exceed 8,192 (B = 16 gives exactly 8,192)
    assert (_v(page, "llm_batched_tokens"), _v(page, "llm_max_seqs")) == (8192, 256)
    assert _v(page, "first_over") == 32
    # the lab (snippets/labs/batch_decode.py): 64 prompts of 512 tokens = 32,768 tokens; it caps
    # max_num_batched_tokens at 8,192, so the largest batch's prefills take 32,768 / 8,192 = 4 steps;
    # its cache need is 64 * (512 + 128) = 40,960 tokens
    assert (_v(page, "lab_all_prompt_tokens"), _v(page, "lab_batched_tokens")) == (32_768, 8_192)
    assert _v(page, "lab_prefill_steps") == 4 and _v(page, "lab_peak_kv_tokens") == 40_960


def test_lesson_2a_figure_rounds_b_star_up():
    """The H200's B* = 989e12 / 4.8e12 * 2 / 2 = 206.04: a whole batch of 207, not 206 (the legend once said 206)."""
    from infercourse import snippets

    svg = snippets.load("lesson_2a/decode_roofline.py").figure_svg()
    assert "compute-bound from B = 207" in svg and "compute-bound from B = 206" not in svg
    assert "compute-bound from B = 164" in svg  # RTX 4090: 165.2e12 / 1.008e12 = 163.89 -> 164


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


def test_attention_flops_refuse_mla():
    """DeepSeek-V3 has no head_dim; hidden / heads = 7168 / 128 = 56 is not its key size (128 + 64): refuse."""
    from infercourse import registry, transformer

    with pytest.raises(ValueError, match="MLA"):
        transformer.attention_flops_per_token(registry.model("deepseek-ai/DeepSeek-V3").config, 1024)


@pytest.mark.build
def test_lesson_2a_built_page_shows_the_budget_and_the_count(site):
    """On the built page, not only in the module: 6.32 GB for the cache and 26 sequences of 4,096 tokens
    (6,317,926,522.88 B; 6,885 blocks // 256 blocks per sequence = 26)."""
    import html
    import re

    text = html.unescape(re.sub(r"<[^>]+>", "", (site / "lessons" / "2a-roofline" / "index.html").read_text("utf-8")))
    text = " ".join(text.split())
    assert "KV budget on the RTX 4090 6.32 GB" in text
    assert "the card has 6.32 GB for the cache: at most 26 fit" in text
    assert "0.00 GB" not in text
