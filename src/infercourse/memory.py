"""How much of a GPU's memory is left for the KV cache, and how many tokens and sequences fit.

Bytes are plain bytes; GB (10^9) and GiB (2^30) appear only when :mod:`infercourse.fmt` writes
them. The model is vLLM's: it multiplies the device total (as CUDA reports it) by
``gpu_memory_utilization``, subtracts the weights and what its profiling run saw besides them
(activations, non-torch memory, CUDA graphs), and gives the rest to the KV cache, in whole blocks.
"""

from __future__ import annotations

import math

from infercourse import registry
from infercourse.checks import nonnegative, whole
from infercourse.checks import positive as _positive


def device_total_bytes(gpu_name: str = registry.LAB_GPU) -> int:
    """Device memory in bytes as CUDA reports it (``registry.GPU_MEMORY_TOTAL_MIB`` * 2^20).

    Raises:
        KeyError: no reported total is in the registry for ``gpu_name``.
    """
    try:
        return registry.GPU_MEMORY_TOTAL_MIB[gpu_name] * 2**20
    except KeyError:
        raise KeyError(
            f"no CUDA-reported memory total for {gpu_name!r}; known: {', '.join(registry.GPU_MEMORY_TOTAL_MIB)}"
        ) from None


def kv_budget_bytes(
    total_bytes: float,
    weight_bytes: float,
    reserve_bytes: float,
    utilization: float = registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
) -> float:
    """Bytes left for the KV cache: total * utilization - weights - reserve (B).

    Args:
        total_bytes: device memory as CUDA reports it (B), not the datasheet's GB.
        weight_bytes: the model's weights as loaded (B).
        reserve_bytes: activations, non-torch memory and CUDA graphs (B); may be 0.
        utilization: vLLM's ``gpu_memory_utilization``, in (0, 1].

    Raises:
        ValueError: a non-positive size, a utilization outside (0, 1], a negative reserve, or
            nothing left for the cache (the model does not fit).
    """
    _positive("total_bytes", total_bytes)
    _positive("weight_bytes", weight_bytes)
    nonnegative("reserve_bytes", reserve_bytes)
    if not (isinstance(utilization, (int, float)) and 0 < utilization <= 1):
        raise ValueError(f"utilization must be in (0, 1], got {utilization!r}")
    budget = total_bytes * utilization - weight_bytes - reserve_bytes
    if budget <= 0:
        raise ValueError(f"weight_bytes + reserve_bytes leave nothing for the KV cache ({budget:.0f} B)")
    return budget


def kv_capacity_tokens(
    budget_bytes: float, kv_bytes_per_token: float, block_size: int = registry.VLLM_DEFAULT_BLOCK_SIZE
) -> int:
    """Tokens of KV cache that fit in ``budget_bytes``, in whole blocks of ``block_size`` tokens.

    floor(budget / (kappa * block_size)) * block_size.

    Raises:
        ValueError: a non-positive budget or kappa, or a block size that is not a positive integer.
    """
    _positive("budget_bytes", budget_bytes)
    _positive("kv_bytes_per_token", kv_bytes_per_token)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size <= 0:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
    return int(budget_bytes // (kv_bytes_per_token * block_size)) * block_size


def max_concurrency(capacity_tokens: int, context_len: int) -> float:
    """Sequences of ``context_len`` tokens the cache holds at once: capacity / context (a ratio).

    vLLM prints the same ratio at start-up ("Maximum concurrency for X tokens per request: Yx");
    the whole number of full-length sequences is its floor.

    Raises:
        ValueError: a non-positive argument.
    """
    _positive("capacity_tokens", capacity_tokens)
    _positive("context_len", context_len)
    return capacity_tokens / context_len


def device_total_upper_bytes(gpu_name: str) -> int:
    """An upper bound (B) on the device memory CUDA reports for ``gpu_name``.

    The CUDA-reported total where the registry has it (:func:`device_total_bytes`); otherwise the
    datasheet's "GB" read as GiB (``memory_gb`` * 2^30): the cards' marketing figures count
    GiB-sized chips and CUDA reports a little less (the RTX 4090's "24 GB" is 24,564 MiB, not
    24,576). Use it to show a batch cannot fit, never that it can.

    Raises:
        KeyError: ``gpu_name`` is not in the registry.
    """
    if gpu_name in registry.GPU_MEMORY_TOTAL_MIB:
        return device_total_bytes(gpu_name)
    return math.ceil(registry.gpu(gpu_name).memory_gb * 2**30)  # whole bytes, rounded up: still an upper bound


def default_kv_budget_bytes(gpu_name: str, weight_bytes: float) -> float:
    """Bytes vLLM 0.26.0 leaves for the KV cache on ``gpu_name`` with its defaults (B): the device's
    memory (:func:`device_total_upper_bytes`: as CUDA reports it where the registry has that figure,
    else an upper bound), times ``gpu_memory_utilization`` (``registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION``),
    less ``weight_bytes`` (B) and the course's non-KV reserve (``registry.VLLM_NON_KV_RESERVE_GIB``).

    Raises:
        KeyError: ``gpu_name`` is not in the registry.
        ValueError: as :func:`kv_budget_bytes` (the weights leave nothing for the cache).
    """
    return kv_budget_bytes(device_total_upper_bytes(gpu_name), weight_bytes, registry.VLLM_NON_KV_RESERVE_GIB * 2**30)


def max_sequences(
    budget_bytes: float, kv_bytes_per_token: float, context_len: int, block_size: int = registry.VLLM_DEFAULT_BLOCK_SIZE
) -> int:
    """Sequences of ``context_len`` tokens whose caches fit in ``budget_bytes`` at once (a count).

    Each sequence takes ceil(S / block_size) whole blocks of kappa * block_size bytes, so this is
    floor(budget / (kappa * block_size)) // ceil(S / block_size); 0 when not even one fits.

    Raises:
        ValueError: a non-positive budget, kappa or context length, or a bad block size.
    """
    if isinstance(context_len, bool) or not isinstance(context_len, int) or context_len <= 0:
        raise ValueError(f"context_len must be a positive whole number of tokens, got {context_len!r}")
    blocks = kv_capacity_tokens(budget_bytes, kv_bytes_per_token, block_size) // block_size
    return blocks // -(-context_len // block_size)


# --- lesson 5A: paging and prefix caching ----------------------------------------------------------


def paging_waste_tokens(tokens: int, block_size: int = registry.VLLM_DEFAULT_BLOCK_SIZE) -> int:
    """Slots allocated but unused by a sequence of ``tokens`` tokens held in blocks of ``block_size``:
    ceil(S / block) * block - S, at most block - 1 (the last block's empty slots). Tokens, not bytes.

    Raises:
        ValueError: ``tokens`` not an integer >= 1, or ``block_size`` not an integer >= 1.
    """
    whole("tokens", tokens, 1)
    whole("block_size", block_size, 1)
    return -(-tokens // block_size) * block_size - tokens


def cached_prefix_tokens(
    shared_tokens: int, prompt_tokens: int, block_size: int = registry.VLLM_DEFAULT_BLOCK_SIZE
) -> int:
    """Prompt tokens a request finds in vLLM's prefix cache when its first ``shared_tokens`` tokens
    equal a prompt already computed (and still cached): the full blocks of the shared part, never
    the whole prompt, floor(min(shared, prompt - 1) / block) * block.

    Only full blocks are hashed and cached, and vLLM caps a hit at prompt_len - 1 so that the last
    prompt token is computed again for its logits (vllm/v1/core/kv_cache_manager.py:231-237 at
    v0.26.0; registry fact ``vllm-prefix-cache-hit-cap``).

    Raises:
        ValueError: ``prompt_tokens`` not an integer >= 1, ``shared_tokens`` not an integer in
            0 .. prompt_tokens, or ``block_size`` not an integer >= 1.
    """
    whole("prompt_tokens", prompt_tokens, 1)
    whole("shared_tokens", shared_tokens, 0)
    whole("block_size", block_size, 1)
    if shared_tokens > prompt_tokens:
        raise ValueError(
            f"shared_tokens ({shared_tokens}) cannot exceed prompt_tokens ({prompt_tokens}); "
            "the shared prefix is part of the prompt"
        )
    return min(shared_tokens, prompt_tokens - 1) // block_size * block_size


ROUTING_POLICIES = ("round_robin", "consistent_hash")
"""The router policies :func:`fleet_prefix_hits` models, named as ``vllm-router --policy`` names them."""


def prefix_computations(policy: str, groups: int, rounds: int, replicas: int) -> int:
    """How many replicas compute (prefill in full) each shared prefix when ``groups`` prefixes are each
    sent ``rounds`` times, interleaved (round 0 of every prefix, then round 1, ...), one request at a time,
    over ``replicas`` replicas, and no cached block is evicted:

    - ``"round_robin"``: request k goes to replica (k + c) mod R, so prefix g's requests go to replicas
      (g + c + r G) mod R; when G and R share no factor they visit min(n, R) replicas;
    - ``"consistent_hash"`` with the prefix's name as the session key: one replica, whatever the ring says.

    Raises:
        ValueError: an unknown policy; a count not an integer >= 1 (``replicas`` >= 2); round robin with
            ``groups`` and ``replicas`` sharing a factor (each prefix then meets fewer replicas: the
            formula does not cover it).
    """
    if policy not in ROUTING_POLICIES:
        raise ValueError(f"unknown routing policy {policy!r}; this formula knows {', '.join(ROUTING_POLICIES)}")
    whole("groups", groups, 1)
    whole("rounds", rounds, 1)
    whole("replicas", replicas, 2)
    if policy == "consistent_hash":
        return 1
    if math.gcd(groups, replicas) != 1:
        raise ValueError(
            f"round robin with {groups} prefixes over {replicas} replicas: they share a factor, so a prefix "
            "meets only some replicas; pick a number of prefixes with no factor in common with the replicas"
        )
    return min(rounds, replicas)


def fleet_prefix_hits(policy: str, groups: int, rounds: int, replicas: int, cached_tokens: int) -> int:
    """Prompt tokens the whole fleet finds in its prefix caches (the sum of every replica's
    ``vllm:prefix_cache_hits``) for the workload of :func:`prefix_computations`: each prefix is computed
    once on each replica it reaches and hit by its other requests, G (n - m) c tokens, ``cached_tokens``
    (c, tokens) being one hit's :func:`cached_prefix_tokens`.

    Raises:
        ValueError: as :func:`prefix_computations`; ``cached_tokens`` not an integer >= 0.
    """
    whole("cached_tokens", cached_tokens, 0)
    return groups * (rounds - prefix_computations(policy, groups, rounds, replicas)) * cached_tokens
