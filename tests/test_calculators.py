"""The calculators (ADR-0008) compute what the course's Python computes, under Node and in Chromium.

The bulk, in the fast loop: a grid of input combinations per calculator (every registry model x card x
weight and KV format, edge cases, bad inputs, the ends of ``calculators.LIMITS``) is handed to the
JavaScript port's pure functions under Node (the build's own) and every output is compared with
:mod:`infercourse.calculators` run here, the reference: whole numbers and strings exactly, real numbers to
a relative 1e-12, messages word for word. Then, in the built site: the registry it serves, real form
interactions (messages beside the fields, hostile input, the state in the URL, loading on approach,
instant navigation, a phone in the dark palette), and axe-core (pinned in package.json, vendored under
tests/vendor/ for this test only) finding no accessibility violation.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import re
import subprocess
from pathlib import Path

import pytest
from test_browser import Watch, _open, browser  # noqa: F401  (the Playwright browser fixture)

from conftest import ROOT
from infercourse import calculators, registry, transformer

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
MODELS = list(registry.MODELS)
GPUS = list(registry.GPUS)
LESSON_1A = "/lessons/1a-kv-cache/"
PAGE = "/calculators/"

FORMULAS = ROOT / "docs" / "javascripts" / "calc" / "formulas.js"
# Calls one of the port's pure functions on every case read from stdin, with the registry given there.
NODE = """
import * as f from "%s";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const { fn, reg, cases } = JSON.parse(text);
console.log(JSON.stringify(cases.map((c) => f[fn](c, reg))));
"""


def node_calc(fn: str, cases: list[dict]) -> list[dict]:
    """``fn`` of docs/javascripts/calc/formulas.js (``memoryCalc``, ``rooflineCalc``, ``attentionCalc``,
    ``specCalc``) on each case, run under Node with the registry the build exports
    (``calculators.registry_export``): the JavaScript's outputs, as JSON. Node is the build's own
    (`make node`); no browser is needed.

    Raises:
        AssertionError: Node failed (its stderr is the message).
    """
    payload = json.dumps({"fn": fn, "reg": calculators.registry_export(), "cases": cases})
    script = NODE % FORMULAS.as_uri()
    done = subprocess.run(["node", "--input-type=module", "-e", script], input=payload, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _config(model: str = registry.COURSE_MODEL) -> dict:
    """A registry model's config as a calculator receives it (a plain dict); the course's model by default."""
    return dict(registry.model(model).config)


def _case(model: str, gpu: str, **fields) -> dict:
    """One grid case: ``model``'s config (:func:`_config`) on ``gpu``, with the calculator's other ``fields``."""
    return dict(config=_config(model), gpu=gpu, **fields)


def _cfg(**changes):
    """Qwen2.5-7B's config with keys changed (None: removed): the pasted configs of the edge cases."""
    config = _config()
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


PASTED = [  # every layout the registry covers, and each way a config can be wrong
    _cfg(num_key_value_heads=1),  # MQA
    _cfg(num_key_value_heads=28),  # MHA
    _cfg(head_dim=256),  # explicit head_dim, not hidden / heads
    _cfg(tie_word_embeddings=True),
    _cfg(
        sliding_window=4096, use_sliding_window=True, layer_types=["sliding_attention"] * 14 + ["full_attention"] * 14
    ),
    _cfg(max_position_embeddings=None),  # max_model_len must then be given
    _cfg(hidden_size=None),  # missing field
    {"hidden_size": 4096},  # no heads and no max_position_embeddings: one message, on the config
    _cfg(num_hidden_layers=0),  # non-positive size
    _cfg(intermediate_size=-5),
    _cfg(vocab_size="152064"),  # a string
    _cfg(num_attention_heads=True),  # a bool
    _cfg(num_attention_heads=27),  # hidden 3584 not divisible by 27 heads
    _cfg(num_attention_heads=28, num_key_value_heads=3),  # KV heads do not divide the heads
    _cfg(sliding_window=0),  # a window of no tokens
    _cfg(n_routed_experts=8),  # mixture of experts: not a dense count
    dict(registry.model("deepseek-ai/DeepSeek-V3").config, max_position_embeddings=163840),  # MLA
    _cfg(hidden_size=1e308),  # a float (JSON's 1e308): no config size is one
    _cfg(vocab_size=2**24 + 1),  # one past transformer.CONFIG_SIZE_MAX
    _cfg(num_hidden_layers=2**40),  # far past it (below 2^53: JavaScript prints it as Python does)
]


def _bad_and_pasted(base: dict, *bad: dict) -> list[dict]:
    """``base`` with each of ``bad``'s changes, then with each :data:`PASTED` config: a calculator's edge cases."""
    return [base | b for b in bad] + [base | dict(config=config) for config in PASTED]


def _memory_cases() -> list[dict]:
    """Registry models x cards (and two custom sizes) x weight formats x KV formats, with
    max_model_len, utilization and reserve cycling through ordinary and edge values; then pasted
    configs and bad settings."""
    lens = [None, 4096, 8192, 32768, 131072, 1]
    utils = [0.92, 0.5, 1, 0.999]
    reserves = [2.0, 0, 0.5]
    cases = []
    cards = [(g, None) for g in GPUS] + [(None, 16), (None, 191.5)]
    for i, (model, (gpu, gib), weights, kv) in enumerate(
        itertools.product(MODELS, cards, calculators.WEIGHT_DTYPES, calculators.KV_DTYPE_BYTES)
    ):
        mml = lens[i % len(lens)]
        if model == "deepseek-ai/DeepSeek-V3" and mml is None:
            mml = 4096
        cases.append(
            dict(
                config=_config(model),
                weights=weights,
                kv=kv,
                gpu=gpu,
                memory_gib=gib,
                utilization=utils[i % len(utils)],
                max_model_len=mml,
                reserve_gib=reserves[i % len(reserves)],
            )
        )
    base = dict(weights="bf16", kv="bf16", gpu="RTX 4090", memory_gib=None, utilization=0.92, reserve_gib=2.0)
    for config, mml in itertools.product(PASTED, [None, 8192]):
        cases.append(dict(base, config=config, max_model_len=mml))
    qwen = _config()
    for bad in (
        dict(utilization=0),
        dict(utilization=1.5),
        dict(utilization=-0.1),
        dict(reserve_gib=-1),
        dict(max_model_len=0),
        dict(max_model_len=4.5),
        dict(max_model_len=-8),
        dict(gpu=None, memory_gib=0),
        dict(gpu=None, memory_gib=-24),
        dict(gpu=None, memory_gib=8),  # the weights do not fit
        dict(max_model_len=32769),  # beyond max_position_embeddings
        dict(max_model_len=32768, gpu="H200", weights="awq", kv="fp8"),
        # the ends of calculators.LIMITS and past them (2^24 = 16,777,216 tokens; 4,096 GiB)
        dict(gpu=None, memory_gib=4096),
        dict(gpu=None, memory_gib=4097),
        dict(gpu=None, memory_gib=1e300),
        dict(reserve_gib=4096),  # nothing left for the KV cache
        dict(reserve_gib=1e308),
        dict(max_model_len=2**24),  # beyond max_position_embeddings, within the range
        dict(max_model_len=2**24 + 1),
        dict(max_model_len=10**20),
    ):
        cases.append(dict(base, config=qwen, max_model_len=None) | bad)
    return cases


def _roofline_cases() -> list[dict]:
    batches = [1, 8, 64, 256, 1024]
    contexts = [1, 512, 4096, 32768]
    cases = []
    for i, (model, gpu, weights, kv) in enumerate(
        itertools.product(MODELS, GPUS, calculators.WEIGHT_DTYPES, calculators.KV_DTYPE_BYTES)
    ):
        cases.append(
            _case(
                model, gpu, weights=weights, kv=kv, batch=batches[i % len(batches)], context=contexts[i % len(contexts)]
            )
        )
    base = dict(config=_config(), gpu="RTX 4090", weights="bf16", kv="bf16", batch=1, context=1024)
    return cases + _bad_and_pasted(
        base,
        dict(batch=0),
        dict(batch=-3),
        dict(batch=2.5),
        dict(context=0),
        dict(context=1.5),
        dict(batch=0, context=0),
        # the ends of calculators.LIMITS (4 x 1,024 = 4,096 sequences; 2^24 tokens) and past them
        dict(batch=4096, context=2**24),
        dict(batch=4097),
        dict(batch=1e308),
        dict(context=2**24 + 1),
        dict(context=1e308),
    )


def _attention_cases() -> list[dict]:
    cases = []
    batches, contexts = [1, 4, 32, 256, 4096], [1, 127, 128, 129, 4096, 32768, 2**24]
    for i, (model, gpu, kv) in enumerate(itertools.product(MODELS, GPUS, calculators.KV_DTYPE_BYTES)):
        for j in range(3):
            cases.append(
                _case(
                    model,
                    gpu,
                    kv=kv,
                    batch=batches[(i + j) % len(batches)],
                    context=contexts[(i + 2 * j) % len(contexts)],
                )
            )
    base = dict(config=_config(), gpu="RTX 4090", kv="bf16", batch=1, context=4096)
    return cases + _bad_and_pasted(
        base,
        dict(batch=0),
        dict(batch=2.5),
        dict(batch=4097),
        dict(batch=1e308),
        dict(context=0),
        dict(context=2**24 + 1),
        dict(context=1e308),
        dict(batch=-1, context=-1),
    )


def _spec_cases() -> list[dict]:
    cases = []
    alphas, ks, batches = [0, 0.5, 0.7, 0.9, 1], [1, 4, 8], [1, 16, 64]
    drafts = [_config(m) for m in (calculators.DRAFT_MODEL, registry.COURSE_MODEL)]
    for i, (model, gpu, alpha, k) in enumerate(itertools.product(MODELS, GPUS, alphas, ks)):
        cases.append(
            _case(
                model,
                gpu,
                alpha=alpha,
                k=k,
                batch=batches[i % len(batches)],
                context=[512, 1024, 8192][i % 3],
                draft=drafts[i % len(drafts)],
            )
        )
    base = dict(
        config=_config(),
        gpu="RTX 4090",
        alpha=0.7,
        k=4,
        batch=1,
        context=1024,
        draft=drafts[0],
    )
    for bad in (
        dict(alpha=-0.1),
        dict(alpha=1.1),
        dict(k=0),
        dict(k=2.5),
        dict(batch=0),
        dict(context=-1),
        dict(alpha=2, k=0, batch=0),
        dict(k=32, batch=4096, context=2**24),  # the ends of calculators.LIMITS
        dict(k=33),
        dict(k=1e308),
        dict(batch=1e308),
        dict(context=1e308),
    ):
        cases.append(base | bad)
    for config in PASTED:
        cases.append(base | dict(config=config))
        cases.append(base | dict(draft=config))
    return cases


def _moe_cases() -> list[dict]:
    moe = [m for m in MODELS if transformer.is_moe(registry.model(m).config)]
    batches = [1, 2, 3, 8, 64, 255, 256, 1000, 4096]
    cases = [
        dict(config=_config(model), gpu=gpu, batch=batch) for model, gpu, batch in itertools.product(moe, GPUS, batches)
    ]
    base = dict(config=_config(moe[0]), gpu="RTX 4090", batch=1)
    for bad in (dict(batch=0), dict(batch=2.5), dict(batch=4097), dict(batch=1e308), dict(batch=-1)):
        cases.append(base | bad)
    for model in MODELS:  # the dense ones: not a mixture of experts
        cases.append(base | dict(config=_config(model)))
    olmoe = _config(moe[0])
    for change in (
        dict(num_experts_per_tok=65),
        dict(num_experts=0),
        dict(num_experts="64"),
        dict(mlp_only_layers="0"),
    ):
        cases.append(base | dict(config=olmoe | change))
    for config in PASTED:
        cases.append(base | dict(config=config))
    return cases


PYTHON = {
    "memoryCalc": lambda c: calculators.memory_calc(**c),
    "moeCalc": lambda c: calculators.moe_calc(**c),
    "rooflineCalc": lambda c: calculators.roofline_calc(**c),
    "specCalc": lambda c: calculators.spec_calc(**c),
    "attentionCalc": lambda c: calculators.attention_calc(**c),
}


def _differences(expected: dict, got: dict) -> list[str]:
    out = []
    for key, want in expected.items():
        have = got.get(key, "<missing>")
        if isinstance(want, float) and isinstance(have, (int, float)) and not isinstance(have, bool):
            ok = math.isclose(want, have, rel_tol=1e-12, abs_tol=0 if want else 1e-300)
        elif isinstance(want, int) and not isinstance(want, bool):
            ok = isinstance(have, (int, float)) and not isinstance(have, bool) and have == want
        else:
            ok = have == want
        if not ok:
            out.append(f"{key}: Python (the reference) {want!r}, JavaScript {have!r}")
    out += [f"{key}: only in JavaScript ({got[key]!r})" for key in got.keys() - expected.keys()]
    return out


@pytest.mark.parametrize(
    "fn, cases",
    [
        ("memoryCalc", _memory_cases()),
        ("rooflineCalc", _roofline_cases()),
        ("specCalc", _spec_cases()),
        ("attentionCalc", _attention_cases()),
        ("moeCalc", _moe_cases()),
    ],
)
def test_the_port_computes_what_the_python_computes(fn, cases):
    """Under Node, in the fast loop: a slip in formulas.js (KV bytes from the query heads, a GiB taken as 10^9)
    fails here, with the case, the output, and which side is the reference (Python)."""
    assert len(cases) >= 100, len(cases)
    results = node_calc(fn, cases)
    problems, failed = [], 0
    for case, got in zip(cases, results, strict=True):
        expected = PYTHON[fn](case)
        failed += bool(expected["errors"])
        diff = _differences(expected, got)
        if diff:
            shown = {k: v for k, v in case.items() if k != "config"}
            problems.append(f"{shown} config={case['config'].get('model_type')}: " + "; ".join(diff))
    print(f"\n{fn}: {len(cases)} cases compared, {failed} of them with input errors")
    assert 10 <= failed < len(cases) // 2, failed  # both kinds are exercised
    assert not problems, (
        f"formulas.js's {fn} differs from the reference, infercourse.calculators, in {len(problems)} of {len(cases)} "
        "cases (fix the JavaScript, or the Python and its tests if the formula changed):\n" + "\n".join(problems[:15])
    )


@pytest.fixture(scope="module")
def page(browser, server):  # noqa: F811
    context, page, watch = _open(browser, 1280, 800)
    page.goto(server + PAGE, wait_until="load")
    yield page
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


def test_the_site_serves_the_registry_s_facts(page):
    served = page.evaluate("fetch('/assets/calc/registry.json').then(r => r.json())")
    assert served == json.loads(json.dumps(calculators.registry_export()))
    assert served["gpus"]["RTX 4090"]["total_bytes"] == 24_564 * 2**20 and len(served["models"]) == len(MODELS)


def _ready(page, kind: str):
    page.locator(f".ic-calc[data-calc={kind}]").scroll_into_view_if_needed()
    page.wait_for_function(f"document.querySelector('.ic-calc[data-calc={kind}]').dataset.state === 'ready'")


def test_the_form_shows_python_s_numbers_and_messages_beside_the_fields(browser, server):  # noqa: F811
    context, page, watch = _open(browser, 1280, 800)
    page.goto(server + LESSON_1A, wait_until="load")
    _ready(page, "memory")
    out = page.locator(".ic-calc[data-calc=memory] .ic-out")
    want = calculators.memory_calc(registry.model().config)
    # 110,160 tokens = floor(6,317,926,522.88 / (57,344 x 16)) x 16 (lesson 1A's hand-worked budget)
    assert f"{want['tokens']:,} tokens" in out.inner_text() and want["tokens"] == 110_160
    assert out.get_attribute("aria-live") == "polite"

    page.fill("#ic-m-utilization", "1.5")
    assert page.inner_text("#ic-m-utilization-msg") == "gpu_memory_utilization must be in (0, 1], got 1.5"
    assert page.get_attribute("#ic-m-utilization", "aria-invalid") == "true"
    page.fill("#ic-m-utilization", "abc")
    assert page.inner_text("#ic-m-utilization-msg") == (
        'gpu_memory_utilization: "abc" is not a plain decimal number (digits and at most one point, like 1024 or 0.9)'
    )
    page.fill("#ic-m-utilization", "0.92")
    assert page.inner_text("#ic-m-utilization-msg") == ""

    page.select_option("#ic-m-model", "paste")
    for config, message in (
        ("{", "config.json is not valid JSON"),
        ('{"hidden_size": 3584}', "the config.json has no num_attention_heads: use the model's whole config.json"),
        (
            '{"hidden_size": 3584, "num_hidden_layers": 0, "num_attention_heads": 28, "num_key_value_heads": 4}',
            "config['num_hidden_layers'] must be a positive integer up to 16,777,216, got 0",
        ),
        (
            '{"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 27, "num_key_value_heads": 3}',
            "hidden_size 3584 is not divisible by num_attention_heads 27; set head_dim",
        ),
        (
            '{"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 3}',
            "num_attention_heads 28 is not a multiple of num_key_value_heads 3",
        ),
    ):
        page.fill("#ic-m-config", config)
        assert page.inner_text("#ic-m-config-msg").startswith(message), (config, page.inner_text("#ic-m-config-msg"))
        assert "NaN" not in page.inner_text(".ic-calc[data-calc=memory]")
    pasted = '{"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4}'
    page.fill("#ic-m-config", pasted)  # kappa needs no more; the parameter count needs the MLP and vocabulary
    assert "57,344 B" in out.inner_text()  # 2 x 28 layers x 4 KV heads x 128 x 2 B
    want = "the config.json has no vocab_size: use the model's whole config.json"
    assert page.inner_text("#ic-m-weights-msg") == want

    # The state is in the URL: a fresh page at that address shows the same inputs and result.
    page.select_option("#ic-m-model", "Qwen/Qwen3-4B")
    page.select_option("#ic-m-kv", "fp8")
    page.fill("#ic-m-max_model_len", "8192")
    shown, url = out.inner_text(), page.url
    assert "m.model=Qwen%2FQwen3-4B" in url and "m.kv=fp8" in url and "m.max_model_len=8192" in url
    again = context.new_page()
    again.goto(url, wait_until="load")
    _ready(again, "memory")
    assert (
        again.input_value("#ic-m-kv") == "fp8"
        and again.locator(".ic-calc[data-calc=memory] .ic-out").inner_text() == shown
    )
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


# Text a reader might type or paste into a numeric field: huge, tiny, signed, hexadecimal, with separators,
# full-width digits, JavaScript's own words for infinity and not-a-number, an exponent, nothing.
HOSTILE = [
    "1e308", "-1e308", "1e300", "2e9", "999999999999999999999", "4097", "16777217", "33", "1.5", "0", "-5", "",
    "abc", "0x10", "1_000", "１２", "Infinity", "-Infinity", "NaN", "1..2", "1e-400", "0.000000001", " 12 ",
]  # fmt: skip
NUMERIC = {
    "memory": ("memory_gib", "utilization", "max_model_len", "reserve_gib"),
    "roofline": ("batch", "context"),
    "attention": ("batch", "context"),
    "spec": ("alpha", "k", "batch", "context"),
    "moe": ("batch",),
}
PREFIX = {"memory": "m", "roofline": "r", "attention": "a", "spec": "s", "moe": "e"}  # ui.js's prefix of each form
NOT_PLAIN = {"1e308", "-1e308", "1e300", "2e9", "abc", "0x10", "1_000", "１２", "Infinity", "-Infinity", "NaN", "1..2"}
# An output a reader must never see: infinity, not-a-number, a negative quantity (a minus sign before a digit that
# does not continue a name such as Qwen2.5-7B), or a count of 10^15 or more written out in full.
NONSENSE = re.compile(r"∞|NaN|Infinity|(?<![\w.])[-−]\d|\d{1,3}(?:,\d{3}){5,}")


def _nonsense(page, kind: str) -> list[str]:
    """The nonsense in one calculator's shown results and its drawing's text (its fields' own messages
    excluded), and any NaN or Infinity in the drawing's coordinates."""
    shown, drawing = page.eval_on_selector(
        f".ic-calc[data-calc={kind}]",
        "el => [el.querySelector('.ic-out').innerText + ' ' + el.querySelector('.ic-fig').textContent,"
        " el.querySelector('.ic-fig').innerHTML]",
    )
    return NONSENSE.findall(shown) + re.findall(r"NaN|Infinity", drawing)


def test_hostile_input_never_shows_infinity_nan_or_a_negative_size(browser, server):  # noqa: F811
    """Every numeric field of every calculator, typed into and given through the URL: anything that is not a
    plain decimal gets a message on its field, values past calculators.LIMITS get the range, and nothing shown
    is ∞, NaN, negative or a wall of digits. (Planted: without the memory range, 1e300 GiB showed ∞.)"""
    context, page, watch = _open(browser, 1280, 800)
    page.goto(server + PAGE, wait_until="load")
    for kind in NUMERIC:
        _ready(page, kind)
    page.select_option("#ic-m-gpu", "custom")
    problems = []
    for kind, keys in NUMERIC.items():
        for key in keys:
            field = f"#ic-{PREFIX[kind]}-{key}"
            default = page.input_value(field)
            for text in HOSTILE:
                page.fill(field, text)
                message = page.inner_text(f"{field}-msg")
                if text in NOT_PLAIN and "is not a plain decimal number" not in message:
                    problems.append(f"{kind}.{key} = {text!r}: no plain-decimal message ({message!r})")
                problems += [f"{kind}.{key} = {text!r} shows {bad!r}" for bad in _nonsense(page, kind)]
            page.fill(field, default)
    # A config pasted with absurd sizes.
    page.select_option("#ic-m-model", "paste")
    for size in ("1e308", "1e21", "16777217", "-1"):
        config = dict(registry.model().config, hidden_size=json.loads(size))
        page.fill("#ic-m-config", json.dumps(config).replace(json.dumps(json.loads(size)), size, 1))
        if "must be a positive integer up to 16,777,216" not in page.inner_text("#ic-m-config-msg"):
            problems.append(f"hidden_size {size}: {page.inner_text('#ic-m-config-msg')!r}")
        problems += [f"pasted hidden_size {size} shows {bad!r}" for bad in _nonsense(page, "memory")]
    # The same through the address bar, which a shared link can set to anything: text that is not a plain
    # decimal, then plain decimals past every range (a field's range is checked once the others parse).
    for query, fields in (
        (
            "m.gpu=custom&m.memory_gib=1e300&m.max_model_len=0x10&r.batch=1e308&r.context=Infinity&s.alpha=NaN"
            "&e.batch=1e308",
            ("m-memory_gib", "m-max_model_len", "r-batch", "r-context", "s-alpha", "e-batch"),
        ),
        (
            "m.gpu=custom&m.memory_gib=99999999999999999999&m.reserve_gib=5000&m.max_model_len=16777217"
            "&r.batch=4097&r.context=16777217&s.k=99999&s.batch=4097&s.context=-1&s.alpha=1.5&e.batch=4097",
            ("m-memory_gib", "m-reserve_gib", "m-max_model_len", "r-batch", "r-context", "s-k", "s-batch", "s-alpha")
            + ("e-batch",),
        ),
    ):
        page.goto(f"{server}{PAGE}?{query}", wait_until="load")
        for kind in NUMERIC:
            _ready(page, kind)
            problems += [f"URL ?{query}: {kind} shows {bad!r}" for bad in _nonsense(page, kind)]
        problems += [f"URL ?{query}: no message on {f}" for f in fields if not page.inner_text(f"#ic-{f}-msg")]
    assert not problems, "\n".join(problems)
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


def test_the_code_loads_only_when_a_calculator_comes_near(browser, server):  # noqa: F811
    """Before the reader comes near, a lesson with a calculator fetches none of its code and stays within
    the lesson page-weight budget (0.5 MB, gzip -6 of each file, as `make bench` counts)."""
    context, page, watch = _open(browser, 390, 600)
    fetched, responses = [], []
    page.on("request", lambda r: fetched.append(r.url) if "/calc/" in r.url else None)
    page.on("response", lambda r: responses.append(r))
    page.goto(server + LESSON_1A, wait_until="networkidle")
    assert not fetched, f"calculator code fetched before the reader came near: {fetched}"
    packed = sum(len(gzip.compress(r.body(), 6)) for r in responses if r.status == 200)
    print(f"\n{LESSON_1A} before any interaction: {packed / 1e6:.3f} MB compressed, {len(responses)} responses")
    assert packed <= 0.5e6, f"{LESSON_1A} weighs {packed / 1e6:.3f} MB compressed before any interaction"
    _ready(page, "memory")
    assert any(u.endswith("/calc/ui.js") for u in fetched) and any(u.endswith("registry.json") for u in fetched)
    # From the keyboard: the load button takes focus in the tab order and the fields follow it.
    page.goto(server + PAGE, wait_until="load")
    page.focus(".ic-calc[data-calc=spec] button")
    page.wait_for_function("document.querySelector('.ic-calc[data-calc=spec]').dataset.state === 'ready'")
    assert page.evaluate("document.activeElement.id") == "ic-s-model"  # focus moves from the button to the form
    page.focus("#ic-s-alpha")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "ic-s-k"
    page.fill("#ic-s-alpha", "1.1")
    assert page.inner_text("#ic-s-alpha-msg") == "alpha (acceptance rate) must be a number from 0 to 1, got 1.1"
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_a_link_to_a_calculator_lands_on_it_and_keeps_its_address(browser, server, width, height):  # noqa: F811
    """/calculators/#spec: the calculators above it grow as they load; the reader still sees the spec
    calculator's heading, and the address keeps #spec (also after a field is edited)."""
    context, page, watch = _open(browser, width, height)
    page.goto(server + PAGE + "#spec", wait_until="load")
    page.wait_for_function("document.querySelector('.ic-calc[data-calc=spec]').dataset.state === 'ready'")
    page.wait_for_timeout(500)  # what loads after (the figure, the other calculators) has settled
    top = page.evaluate("document.getElementById('spec').getBoundingClientRect().top")
    assert 0 <= top < height / 2, f"the #spec heading is at {top:.0f} px in a {height} px window"
    assert page.evaluate("location.hash") == "#spec"
    page.fill("#ic-s-k", "5")
    assert page.evaluate("location.hash") == "#spec" and "s.k=5" in page.url, page.url
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


def test_instant_navigation_mounts_the_calculators(browser, server):  # noqa: F811
    """Material intercepts a click only once it holds the sitemap (fetched after the page loads; a click
    before that is an ordinary page load, fine for a reader), so the test waits for the network to settle."""
    context, page, watch = _open(browser, 1280, 800)
    with page.expect_response(lambda r: r.url.endswith("/sitemap.xml")):
        page.goto(server + "/", wait_until="networkidle")
    page.evaluate("window.__notReloaded = 'marker'")
    page.click("nav.md-nav--primary a.md-nav__link[href$='calculators/']")
    page.wait_for_function("document.querySelector('link[rel=canonical]').href.endsWith('/calculators/')")
    for kind in ("memory", "roofline", "attention", "spec", "moe"):
        _ready(page, kind)
    assert page.evaluate("window.__notReloaded") == "marker", "the click reloaded the page"
    assert page.locator(".ic-calc[data-calc=roofline] svg.ic-roofline").count() == 1
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


@pytest.mark.parametrize(
    "path, scheme",
    [
        (PAGE, "light"),
        (PAGE, "dark"),
        (LESSON_1A, "dark"),
        ("/lessons/2a-roofline/", "dark"),
        ("/lessons/6a-speculative-decoding/", "light"),
    ],
)
def test_axe_finds_no_violation_and_a_phone_fits(browser, server, path, scheme):  # noqa: F811
    """axe-core checks the whole calculators page, and the calculators on a lesson (the lessons' other
    content has findings of its own, outside this test's scope); hidden fields stay hidden."""
    context, page, watch = _open(browser, 390, 844, scheme)
    page.goto(server + path, wait_until="load")
    kinds = page.eval_on_selector_all(".ic-calc", "els => els.map(e => e.dataset.calc)")
    assert kinds, f"{path} has no calculator"
    for kind in kinds:
        _ready(page, kind)
    # the roofline chart's smallest text as drawn: its font size (user units) times the chart's scale
    smallest = """Math.min(...[...document.querySelectorAll('.ic-roofline text')].map(t => {
        const svg = t.ownerSVGElement;
        return parseFloat(getComputedStyle(t).fontSize) * svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    }))"""
    if "roofline" in kinds:
        assert page.evaluate(smallest) >= 11, f"{path}: the roofline chart's text is {page.evaluate(smallest):.1f} px"
    page.fill("#ic-r-batch" if "roofline" in kinds else "#ic-m-utilization" if "memory" in kinds else "#ic-s-k", "0")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    hidden = "[...document.querySelectorAll('.ic-field[hidden]')].filter(e => e.checkVisibility()).length"
    assert page.evaluate(hidden) == 0, "a field meant to be hidden is drawn"
    page.add_script_tag(path=str(AXE))
    scope = "document" if path == PAGE else "'.ic-calc'"
    result = page.evaluate(
        f"async () => (await axe.run({scope})).violations.map(v => `${{v.id}}: ${{v.help}} (${{v.nodes.length}})`)"
    )
    assert not result, f"{path}: {result}"
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


# --- the Python reference itself, against hand arithmetic (no browser: these run in `make check`) ---


def test_memory_reference_matches_hand_arithmetic():
    got = calculators.memory_calc(registry.model().config)
    # 24,564 MiB = 25,757,220,864 B; x 0.92 - 2 x 7,615,616,512 B - 2 GiB = 6,317,926,522.88 B
    assert got["total_bytes"] == 25_757_220_864 and got["weight_bytes"] == 15_231_233_024
    assert math.isclose(got["budget"], 6_317_926_522.88, rel_tol=1e-15)
    # kappa = 2 x 28 layers x 4 KV heads x 128 x 2 B = 57,344; floor(budget / (57,344 x 16)) = 6,885 blocks
    assert got["kappa"] == 57_344 and got["tokens"] == 6_885 * 16 == 110_160
    # max_model_len defaults to 32,768: 110,160 / 32,768 = 3.3618...; 6,885 // 2,048 blocks = 3 requests
    assert got["concurrency"] == 110_160 / 32_768 and got["sequences"] == 3 and got["starts"] is True
    llama = calculators.memory_calc(registry.model("meta-llama/Llama-2-13b-hf").config)
    # 2 x 13,015,864,320 = 26.03 GB of weights > 0.92 x 25.76 GB: no cache at all
    assert llama["starts"] is False and llama["reason"].startswith("No available memory for the cache blocks")
    mistral = calculators.memory_calc(registry.model("mistralai/Mistral-7B-v0.1").config)
    assert mistral["note"].startswith("32 of 32 layers use a sliding window") and not got["note"]
    beyond = calculators.memory_calc(registry.model().config, max_model_len=32_769)
    assert beyond["starts"] is False and "max_position_embeddings=32768" in beyond["reason"]


def test_memory_reference_puts_each_message_on_its_field():
    mla = calculators.memory_calc(registry.model("deepseek-ai/DeepSeek-V3").config, max_model_len=4096)
    assert mla["kappa"] == 61 * (512 + 64) * 2  # MLA: latent + RoPE key per layer
    assert mla["params"] == 671_026_419_200 and not mla["errors"]  # tests/lessons/test_7b.py counts it by hand
    assert not mla["starts"] and mla["tokens"] == 0  # 1.34 TB of BF16 weights on a 24 GB card
    wrong = calculators.memory_calc({**registry.model("Qwen/Qwen3-30B-A3B").config, "num_experts_per_tok": 200})
    assert wrong["errors"] == {"weights": "num_experts_per_tok 200 exceeds the 128 routed experts"}
    bad = calculators.memory_calc(registry.model().config, utilization=0, reserve_gib=-1, max_model_len=0)
    assert set(bad["errors"]) == {"utilization", "reserve_gib", "max_model_len"} and bad["starts"] is None
    # A config without heads gets one message, not a second one for the max_model_len it would supply.
    partial = calculators.memory_calc({"hidden_size": 4096})
    want = "the config.json has no num_attention_heads: use the model's whole config.json"
    assert partial["errors"] == {"config": want}


def test_roofline_and_spec_references_match_hand_arithmetic():
    cfg = registry.model().config
    bf16 = calculators.roofline_calc(cfg, "RTX 4090")
    # untied: (2 N - 2 V d) / (N - V d) = 2 B per matmul weight; ridge 165.2e12 / 1008e9 = 163.89 FLOP/B
    assert bf16["b"] == 2.0 and math.isclose(bf16["ridge"], 165.2e12 / 1008e9)
    assert bf16["linear_intensity"] == 1.0 and bf16["attention_intensity"] == 7.0  # 2 x (28 / 4) / 2
    fp8 = calculators.roofline_calc(cfg, "RTX 4090", weights="fp8")
    assert math.isclose(fp8["ridge"], 330.3e12 / 1008e9) and fp8["peak_tflops"] == 330.3
    a100 = calculators.roofline_calc(cfg, "A100", weights="fp8")
    assert a100["peak_tflops"] == 312  # no FP8 tensor cores: weight-only FP8 runs BF16 math
    assert calculators.spec_calc(cfg, "RTX 4090", alpha=0)["expected"] == 1.0
    assert calculators.spec_calc(cfg, "RTX 4090", alpha=1, k=4)["expected"] == 5.0


def test_attention_reference_matches_hand_arithmetic():
    cfg = registry.model().config  # Qwen2.5-7B: d_h 128, 28 query heads, 4 key/value heads
    long = calculators.attention_calc(cfg, "RTX 4090", kv="fp8", batch=1, context=32768)
    # one head: 32,768^2 x 2 = 2,147,483,648 B; 28 of them 60,129,542,144 B; naive 2 (4 S 128 + 4 S^2) =
    # 2 x 4,311,744,512 = 8,623,489,024 B; tiled at most 2 (2 S 128 + 2 S 128 x 256) = 4,311,744,512 B; once 4 S 128 2
    assert (long["score_head"], long["score_layer"]) == (2_147_483_648, 60_129_542_144)
    assert (long["naive"], long["tiled"], long["once"]) == (8_623_489_024, 4_311_744_512, 33_554_432)
    # B h_kv = 4 blocks on 128 SMs: 3.125 % busy, 32 splits fill them; FP8 cache on 8.9: FlashInfer
    assert (long["blocks"], long["busy"], long["splits"], long["backend"]) == (4, 0.03125, 32, "FLASHINFER")
    wide = calculators.attention_calc(cfg, "H100", batch=64, context=1024)
    assert (wide["blocks"], wide["busy"], wide["splits"], wide["backend"]) == (256, 1.0, 1, "FLASH_ATTN")
    assert calculators.attention_calc(cfg, "A100", kv="fp8")["backend"] == "FLASHINFER"  # FA2 on 8.0 reads no FP8
    assert calculators.attention_calc(cfg, "RTX 4090", batch=0)["errors"] == {
        "batch": "batch must be a whole number from 1 to 4,096, got 0"
    }


def test_moe_reference_matches_hand_arithmetic():
    olmoe = registry.model("allenai/OLMoE-1B-7B-0924-Instruct").config
    one = calculators.moe_calc(olmoe, "RTX 4090", batch=1)
    # 64 experts, 8 per token; tests/lessons/test_7b.py: N 6,919,161,856, active 1,282,017,280; one token reads
    # 373,688,320 + 8 x 16 x 6,291,456 = 1,178,994,688 weights, 2,357,989,376 B -> 2.33928 ms at 1,008 GB/s
    assert (one["experts"], one["top_k"], one["total"], one["active"]) == (64, 8, 6_919_161_856, 1_282_017_280)
    assert (one["touched"], one["touched_share"], one["read_bytes"]) == (8, 0.125, 2_357_989_376)
    assert one["linear_s"] == pytest.approx(2.33928e-3, abs=1e-8)
    assert one["all_bytes"] == 2 * (373_688_320 + 64 * 16 * 6_291_456)  # 13,632,278,528 B
    assert one["ridge_batch"] == pytest.approx(165.2e12 / 1008e9 * 8)  # 1,311.1: B* x 64 / 8
    assert (one["weight_bytes"], one["cards"]) == (13_838_323_712, 1)  # 2 x N, in 24,564 MiB (25,757,220,864 B)
    deepseek = calculators.moe_calc(registry.model("deepseek-ai/DeepSeek-V3").config, "RTX 4090")
    assert deepseek["cards"] == 53  # 1,342,052,838,400 / 25,757,220,864 = 52.1: the weights alone fill 53 cards
    dense = calculators.moe_calc(registry.model().config, "RTX 4090")
    assert dense["errors"] == {
        "config": "not a mixture-of-experts config: it sets neither num_experts nor n_routed_experts"
    }
