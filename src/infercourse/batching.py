"""Continuous batching (lesson 4A): how vLLM's scheduler fills engine steps, what static batching
wastes, and what a batch buys in throughput and costs in time per output token.

Units: steps and tokens are whole counts; times in seconds; throughput in tokens per second;
arrival rates in requests per second. A decode step's time is lesson 2A's floor
(:func:`infercourse.roofline.decode_step_floor`) plus a fixed per-step overhead; a serving step
(:func:`serving_step_time`) also carries the prompt tokens that arrive while requests finish.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infercourse.checks import positive, whole
from infercourse.registry import GPUFacts
from infercourse.roofline import decode_step_floor


@dataclass(frozen=True)
class Schedule:
    """What :func:`schedule` predicts for one batch of requests submitted together.

    Attributes:
        steps: engine steps that sample at least one token: what vLLM's ``vllm:iteration_tokens_total``
            histogram counts (a step that only carries part of a prompt samples nothing and is not counted).
        passes: every forward pass, including any that only carry part of a prompt (>= ``steps``).
        first_token_step: per request, the pass (1-based) that sampled its first token.
        last_token_step: per request, the pass that sampled its last token.
        peak_running: the most requests holding a slot at once.
        peak_kv_tokens: the most tokens whose KV the running requests held after a pass.
    """

    steps: int
    passes: int
    first_token_step: tuple[int, ...]
    last_token_step: tuple[int, ...]
    peak_running: int
    peak_kv_tokens: int


def schedule(
    prompt_tokens: Sequence[int], output_tokens: Sequence[int], max_num_seqs: int, max_num_batched_tokens: int
) -> Schedule:
    """Replay vLLM's V1 scheduler, synchronous mode, for requests that all arrive before its first step.

    Each pass has a budget of ``max_num_batched_tokens`` tokens. Running requests come first, in the
    order they were admitted: a decoding request takes 1 token, a request part-way through its
    prompt takes the rest of it (as much as the budget allows). Then waiting requests are admitted in
    arrival order (FCFS) while fewer than ``max_num_seqs`` run and budget is left; each takes its
    prompt, cut to the budget (chunked prefill). A request samples a token in every pass that
    completes all of its known tokens, so its prompt's last chunk yields its first output token, and
    it leaves (freeing its slot for the next pass) once it has its ``output_tokens``. This is
    ``Scheduler.schedule`` of vllm/v1/core/sched/scheduler.py:425-1070 at v0.26.0 with chunked
    prefill on (the default), no prefix-cache hits, no speculative decoding and enough KV blocks
    (no preemption); async scheduling off (vLLM's CPU build forces it off; on a GPU it is on by
    default and refills a freed slot one pass later).

    Args:
        prompt_tokens: per request, its prompt length (tokens), in arrival order.
        output_tokens: per request, the tokens it generates (``max_tokens`` with ``ignore_eos``).
        max_num_seqs: the most requests running at once (vLLM's ``max_num_seqs``).
        max_num_batched_tokens: tokens per pass (vLLM's ``max_num_batched_tokens``).

    Returns:
        :class:`Schedule`.

    Raises:
        ValueError: the two lists differ in length or are empty, or a count is not a positive integer.
    """
    if len(prompt_tokens) != len(output_tokens) or not prompt_tokens:
        raise ValueError(
            f"need one output length per prompt, at least one request; got {len(prompt_tokens)} prompts "
            f"and {len(output_tokens)} output lengths"
        )
    for i, (p, n) in enumerate(zip(prompt_tokens, output_tokens, strict=True)):
        whole(f"prompt_tokens[{i}]", p)
        whole(f"output_tokens[{i}]", n)
    whole("max_num_seqs", max_num_seqs)
    whole("max_num_batched_tokens", max_num_batched_tokens)

    count = len(prompt_tokens)
    computed, generated = [0] * count, [0] * count
    first, last = [0] * count, [0] * count
    waiting = deque(range(count))
    running: list[int] = []
    passes = steps = peak_running = peak_kv = 0
    while waiting or running:
        passes += 1
        budget, planned = max_num_batched_tokens, []
        for i in running:
            if budget == 0:
                break
            take = min(prompt_tokens[i] + generated[i] - computed[i], budget)
            planned.append((i, take))
            budget -= take
        while waiting and budget > 0 and len(running) < max_num_seqs:
            i = waiting.popleft()
            take = min(prompt_tokens[i], budget)
            planned.append((i, take))
            running.append(i)
            budget -= take
        peak_running = max(peak_running, len(running))
        sampled = False
        for i, take in planned:
            computed[i] += take
            if computed[i] == prompt_tokens[i] + generated[i]:
                generated[i] += 1
                sampled = True
                first[i] = first[i] or passes
                last[i] = passes
        peak_kv = max(peak_kv, sum(computed[i] for i in running))
        running = [i for i in running if generated[i] < output_tokens[i]]
        steps += sampled
    return Schedule(steps, passes, tuple(first), tuple(last), peak_running, peak_kv)


def static_steps(
    prompt_tokens: Sequence[int], output_tokens: Sequence[int], batch: int, max_num_batched_tokens: int
) -> int:
    """Engine steps (as :attr:`Schedule.steps`) of static batching: the requests in chunks of
    ``batch``, in order, each chunk run to its end before the next starts (one ``generate`` call
    per chunk). Each chunk takes its longest request's steps, plus any pass its prompts need beyond
    the first when they do not fit one budget.

    Raises:
        ValueError: as :func:`schedule`.
    """
    whole("batch", batch)
    return sum(
        schedule(prompt_tokens[k : k + batch], output_tokens[k : k + batch], batch, max_num_batched_tokens).steps
        for k in range(0, len(prompt_tokens), batch)
    )


def expected_max_uniform(low: int, high: int, batch: int) -> float:
    """E[max of ``batch`` independent output lengths, each uniform on the integers low..high] (tokens).

    E[max] = low + sum over k = low .. high-1 of P(max > k), with P(max <= k) = ((k - low + 1) / m)^batch
    and m = high - low + 1. Exact, not an approximation.

    Raises:
        ValueError: ``low`` or ``batch`` not an integer >= 1, or ``high`` < ``low``.
    """
    whole("low", low)
    whole("high", high, low)
    whole("batch", batch)
    m = high - low + 1
    return low + sum(1 - ((k - low + 1) / m) ** batch for k in range(low, high))


def useful_fraction(low: int, high: int, batch: int) -> float:
    """Share of a static batch's decode slots that produce a token: E[n] / E[max n] for output lengths
    uniform on low..high (a fraction; 1 when every request has the same length).

    A static batch of ``batch`` requests runs max n steps; request i uses n_i of them.

    Raises:
        ValueError: as :func:`expected_max_uniform`.
    """
    return (low + high) / 2 / expected_max_uniform(low, high, batch)


def step_time(
    gpu: GPUFacts, config, batch: int, context_len: int, overhead_s: float = 0.0, weight_bytes: float = 2
) -> float:
    """Time (s) of one decode step of ``batch`` sequences at a mean context of ``context_len`` tokens:
    lesson 2A's floor :func:`~infercourse.roofline.decode_step_floor` plus ``overhead_s`` (scheduling,
    sampling, kernel launches; 0 gives the floor).

    Raises:
        ValueError: a non-positive batch, length or width; a negative or non-finite overhead.
    """
    if overhead_s != 0:
        positive("overhead_s", overhead_s)
    return decode_step_floor(gpu, config, context_len, batch, weight_bytes) + overhead_s


def throughput(
    gpu: GPUFacts, config, batch: int, context_len: int, overhead_s: float = 0.0, weight_bytes: float = 2
) -> float:
    """Output tokens per second of a full batch in steady decode, X(B) = B / t(B) (:func:`step_time`).

    Raises:
        ValueError: as :func:`step_time`.
    """
    return batch / step_time(gpu, config, batch, context_len, overhead_s, weight_bytes)


def serving_step_time(
    gpu: GPUFacts,
    config,
    batch: int,
    prompt_len: int,
    output_len: int,
    overhead_s: float = 0.0,
    weight_bytes: float = 2,
) -> float:
    """Time (s) of one engine step of a server in steady state with ``batch`` requests running, each of
    ``prompt_len`` prompt and ``output_len`` output tokens: the B decodes plus the prompts that arrive.

    By Little's law B / n-bar requests finish, and as many start, per step, so a step carries B decode
    tokens at the mean context c = S_in + n-bar // 2 and P = B S_in / n-bar prompt tokens (chunked prefill
    mixes them in). Its floor, weights read once: linear max(2 (M - H)(B + P) + 2 H B, M b), H = vocab x
    hidden (the head runs on the B sampling positions); attention max(4 L h d_h (B c + (B / n-bar) S_in
    (S_in + 1) / 2), kappa (B c + P)) (decodes read their caches, prefills attend causally and write
    theirs); plus ``overhead_s``. At large B the compute of the prompts dominates: a request costs
    2 (M - H)(S_in + n-bar) FLOPs, whatever the batch.

    Raises:
        ValueError: a non-positive batch, length or width; a negative or non-finite overhead.
    """
    from infercourse.roofline import matmul_params, time_floor
    from infercourse.transformer import attention_flops_per_token, kv_bytes_per_token

    positive("batch", batch)
    positive("prompt_len", prompt_len)
    positive("output_len", output_len)
    positive("weight_bytes", weight_bytes)
    if overhead_s != 0:
        positive("overhead_s", overhead_s)
    arrivals = batch / output_len  # requests started (and finished) per step
    prompt = arrivals * prompt_len  # prompt tokens per step
    context = prompt_len + output_len // 2
    m, head = matmul_params(config), config["vocab_size"] * config["hidden_size"]
    linear = time_floor(gpu, 2 * (m - head) * (batch + prompt) + 2 * head * batch, m * weight_bytes)
    keys = batch * context + arrivals * prompt_len * (prompt_len + 1) / 2
    attention = time_floor(
        gpu, attention_flops_per_token(config, 1) * keys, kv_bytes_per_token(config, 2) * (batch * context + prompt)
    )
    return linear + attention + overhead_s


def step_tokens(batch: int, prompt_len: int, output_len: int) -> float:
    """Tokens one steady-state step carries (tokens): B decodes plus B S_in / n-bar prompt tokens
    (:func:`serving_step_time`); a batch whose steps need more than ``max_num_batched_tokens`` cannot
    keep up with its own arrivals."""
    return batch * (1 + prompt_len / output_len)


@dataclass(frozen=True)
class Server:
    """One vLLM server under open-loop load, as the step model sees it (lesson 4A).

    Attributes:
        gpu: the card (:class:`~infercourse.registry.GPUFacts`).
        config: the model's ``config.json`` values (a mapping).
        prompt_len: S_in, prompt tokens per request.
        output_len: n-bar, output tokens per request.
        overhead_s: tau_0, the fixed overhead of every engine step (s).
        max_batch: the most requests running at once: ``max_num_seqs``, or what the KV cache holds.
        max_num_batched_tokens: vLLM's token budget per engine step.
        weight_bytes: bytes per matmul weight (2: BF16).
    """

    gpu: GPUFacts
    config: Mapping[str, Any]
    prompt_len: int
    output_len: int
    overhead_s: float
    max_batch: int
    max_num_batched_tokens: int
    weight_bytes: float = 2

    def step_time(self, batch: int) -> float:
        """:func:`serving_step_time` of a running batch of ``batch`` requests on this server (s)."""
        return serving_step_time(
            self.gpu, self.config, batch, self.prompt_len, self.output_len, self.overhead_s, self.weight_bytes
        )


def batch_at_rate(server: Server, rate: float) -> int | None:
    """The running batch B (sequences) that carries ``rate`` requests/s on ``server`` in steady state: the
    smallest B with B >= rate * n-bar * t(B) (Little's law, L = lambda W, with W = n-bar steps of
    :func:`serving_step_time`) whose steps fit ``max_num_batched_tokens`` (:func:`step_tokens`). None when no
    B up to ``max_batch`` carries it: above the knee, the queue grows without bound.

    Raises:
        ValueError: a non-positive rate, length, ``max_batch`` or budget; as :func:`serving_step_time`.
    """
    positive("rate", rate)
    positive("max_batch", server.max_batch)
    positive("max_num_batched_tokens", server.max_num_batched_tokens)
    for batch in range(1, server.max_batch + 1):
        if step_tokens(batch, server.prompt_len, server.output_len) > server.max_num_batched_tokens:
            return None
        if batch >= rate * server.output_len * server.step_time(batch):
            return batch
    return None


def max_request_rate(server: Server) -> dict:
    """The knee: the highest rate (requests/s) ``server`` sustains with at most ``max_batch`` running requests,
    lambda_max = max over B of B / (n-bar t(B)) with t :func:`serving_step_time` (prefill counted), over the
    batches whose steps fit ``max_num_batched_tokens``. Returns ``{"rate", "B", "tpot", "x", "demand"}``: the
    rate, the batch that reaches it, its step time (s), the output rate X (tokens/s) and what it asks of the
    card (:class:`~infercourse.roofline.Demand`).

    Raises:
        ValueError: a non-positive length, ``max_batch`` or budget; a budget too small for B = 1; as
            :func:`serving_step_time`.
    """
    positive("max_batch", server.max_batch)
    positive("max_num_batched_tokens", server.max_num_batched_tokens)
    prompt_len, output_len, budget = server.prompt_len, server.output_len, server.max_num_batched_tokens
    batches = [b for b in range(1, server.max_batch + 1) if step_tokens(b, prompt_len, output_len) <= budget]
    if not batches:
        raise ValueError(
            f"max_num_batched_tokens = {budget} cannot carry even one request's share of its "
            f"{prompt_len}-token prompt per step; raise it to at least {step_tokens(1, prompt_len, output_len):g}"
        )
    rate, batch, t = max((b / (output_len * t), b, t) for b in batches for t in [server.step_time(b)])
    return _serving_point(server, rate, batch, t)


def _serving_point(server: Server, rate: float, batch: int, tpot: float) -> dict:
    """``{"rate", "B", "tpot", "x", "demand"}`` of ``server`` in a steady state serving ``rate`` requests/s at
    ``batch``."""
    from infercourse.roofline import serving_demand

    prompt_len, output_len = server.prompt_len, server.output_len
    what = f"{rate:.3g} requests/s of {prompt_len} + {output_len} tokens at B = {batch}"
    demand = serving_demand(server.gpu, server.config, rate, prompt_len, output_len, tpot, what)
    return {"rate": rate, "B": batch, "tpot": tpot, "x": rate * output_len, "demand": demand}


def rate_point(server: Server, rate: float) -> dict:
    """The predicted steady state of ``server`` under open-loop load at ``rate`` requests/s: ``{"rate", "B",
    "tpot", "x", "knee", "demand"}``. Below the knee B is :func:`batch_at_rate`, TPOT (s) its
    :func:`serving_step_time` and the output rate X (tokens/s) what arrives, rate * n-bar. Past it
    (``knee`` True) the server runs at :func:`max_request_rate`'s point and the queue grows. ``demand``
    is what the point asks of the card (:class:`~infercourse.roofline.Demand`).

    Raises:
        ValueError: as :func:`batch_at_rate` and :func:`max_request_rate`.
    """
    batch = batch_at_rate(server, rate)
    if batch is None:
        return {**max_request_rate(server), "rate": rate, "knee": True}
    return {**_serving_point(server, rate, batch, server.step_time(batch)), "knee": False}
