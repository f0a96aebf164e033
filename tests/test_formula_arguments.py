"""Every public formula of roofline, memory and transformer refuses a bad size or count by name.

For each numeric parameter of each function (found by inspecting the signatures, so a new formula is covered
the day it lands): ``True``, ``-1`` and a non-number each raise ValueError whose message names the parameter,
and the least value the docstring allows (1, or 0 for the parameters in ``ZERO_OK``) is accepted. The
baseline arguments are ordinary serving sizes; ``BASELINE_BY_FUNCTION`` sets the few that must fit together.
Found by mutation testing (``make mutation``): a check that lost its argument's name, or let a bool through,
or moved its bound by one, broke no other test.
"""

from __future__ import annotations

import inspect
import re

import pytest

from infercourse import memory, registry, roofline, transformer

DENSE = registry.model().config  # the course's model, Qwen2.5-7B-Instruct
MOE = registry.model("allenai/OLMoE-1B-7B-0924-Instruct").config
GPU = registry.gpu()

# Ordinary values by parameter name (units are each function's own: tokens, bytes, seconds, GB/s).
BASELINE: dict[str, object] = {
    "gpu": GPU,
    "config": DENSE,
    "target_config": DENSE,
    "draft_config": registry.model("Qwen/Qwen2.5-0.5B-Instruct").config,
    "intensity": 10.0,
    "flops": 1e12,
    "bytes_moved": 1e9,
    "params": 7e9,
    "kv_bytes_per_token": 57_344,
    "context_len": 1024,
    "context": 512,
    "batch": 8,
    "weight_bytes": 2,
    "kv_dtype_bytes": 2,
    "dtype_bytes": 2,
    "prompt_len": 512,
    "chunk": 256,
    "budget": 256,
    "decoders": 4,
    "alpha": 0.7,
    "k": 4,
    "target_step": 0.02,
    "draft_step": 0.002,
    "verify_step": 0.022,
    "output_tokens": 64,
    "message_bytes": 1e6,
    "ranks": 2,
    "link_gb_s": 25.0,
    "hop_latency_s": 1e-5,
    "tokens": 64,
    "logit_rows": 8,
    "rows": 8,
    "output_len": 128,
    "step_s": 0.02,
    "seconds": 0.1,
    "what": "a test",
    "price_per_hour": 2.0,
    "tokens_per_s": 1000.0,
    "rate": 1.0,
    "head_dim": 128,
    "tile": 128,
    "max_num_seqs": 256,
    "max_num_batched_tokens": 8192,
    "speculative_tokens": 0,
    "sizes": [1, 2, 4, 8],
    "layers": 28,
    "launch_s": 5e-6,
    "overhead_s": 1e-3,
    "floor_s": 0.015,
    "experts": 64,
    "top_k": 8,
    "experts_touched": 32.0,
    "hidden": 2048,
    "total_bytes": 24e9,
    "reserve_bytes": 1e9,
    "utilization": 0.9,
    "budget_bytes": 5e9,
    "block_size": 16,
    "capacity_tokens": 100_000,
    "gpu_name": "RTX 4090",
    "shared_tokens": 256,
    "prompt_tokens": 512,
    "policy": "round_robin",
    "groups": 3,
    "rounds": 4,
    "replicas": 2,
    "cached_tokens": 256,
    "group_size": 128,
    "zero_point_bytes": 0.5,
    "rank": 16,
}
MOE_FORMULAS = ("moe_step_params", "moe_decode_kernel_floors", "moe_decode_demand", "moe_experts", "moe_layer_indices")
# Where arguments must fit together, baselines that let each one go down to its least value alone.
BASELINE_BY_FUNCTION: dict[str, dict[str, object]] = {
    **{name: {"config": MOE} for name in (*MOE_FORMULAS, "moe_param_breakdown")},
    "chunked_prefill_steps": {"decoders": 0},  # budget > decoders
    "expected_experts_touched": {"top_k": 1},  # top_k <= experts
    "experts_touched_sd": {"top_k": 1},
    "cached_prefix_tokens": {"shared_tokens": 1},  # shared_tokens <= prompt_tokens
    "kv_budget_bytes": {"weight_bytes": 0.25, "reserve_bytes": 0},  # weights + reserve < utilization x total
}
# The least value of a parameter, where it is not 1: 0 for a count that may be empty or an amount that may be nil;
# 2 for a fleet's replicas (one replica is no routing).
LEAST = {
    "context": 0,
    "decoders": 0,
    "speculative_tokens": 0,
    "cached_tokens": 0,
    "hop_latency_s": 0,
    "reserve_bytes": 0,
    "replicas": 2,
}
# Parameters no numeric check applies to: they are not sizes or counts.
NOT_NUMERIC = {"gpu", "config", "target_config", "draft_config", "what", "sizes", "gpu_name", "policy"}
# Numbers with their own range, tested in their modules: fractions, and sizes set from a list of allowed values.
OWN_RANGE = {
    "alpha",
    "utilization",
    "zero_point_bytes",
    "peak_tflops",
    "kernels_per_layer",
    "kernels_outside",
    "experts_touched",
}


def _formulas():
    for module in (roofline, memory, transformer):
        for name, fn in vars(module).items():
            private = name.startswith("_") or name.startswith("x_") or "__mutmut_" in name  # x_...: mutmut's copies
            if inspect.isfunction(fn) and fn.__module__ == module.__name__ and not private:
                yield pytest.param(fn, id=f"{module.__name__.rpartition('.')[2]}.{name}")


def _numeric_cases():
    for param in _formulas():
        fn = param.values[0]
        for p in inspect.signature(fn).parameters.values():
            if p.name not in NOT_NUMERIC | OWN_RANGE:
                yield pytest.param(fn, p.name, id=f"{param.id}:{p.name}")


def _kwargs(fn) -> dict[str, object]:
    """The baseline arguments of ``fn``: every parameter without a default, and every numeric one."""
    own = BASELINE_BY_FUNCTION.get(fn.__name__, {})
    kwargs = {}
    for p in inspect.signature(fn).parameters.values():
        if p.name in own:
            kwargs[p.name] = own[p.name]
        elif p.default is inspect.Parameter.empty or (p.name in BASELINE and p.name not in OWN_RANGE):
            assert p.name in BASELINE, f"{fn.__qualname__}: give BASELINE a value for its parameter {p.name!r}"
            kwargs[p.name] = BASELINE[p.name]
    return kwargs


@pytest.mark.parametrize("fn", list(_formulas()))
def test_each_formula_runs_on_ordinary_sizes(fn):
    fn(**_kwargs(fn))


@pytest.mark.parametrize(("fn", "name"), list(_numeric_cases()))
def test_a_bad_size_is_refused_by_name(fn, name):
    for bad in (True, -1, "8"):
        kwargs = _kwargs(fn) | {name: bad}
        with pytest.raises(ValueError) as caught:
            fn(**kwargs)
        assert re.search(rf"(?<![\w.]){name}(?!\w)", str(caught.value)), (
            f"{fn.__qualname__}({name}={bad!r}) raised {str(caught.value)!r}: the message must name {name!r}"
        )


@pytest.mark.parametrize(("fn", "name"), list(_numeric_cases()))
def test_the_least_allowed_size_is_accepted(fn, name):
    fn(**_kwargs(fn) | {name: LEAST.get(name, 1)})
