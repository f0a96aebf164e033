"""Lab 0C, ``snippets/labs/weights.py``: the parameter bytes vLLM holds, against config.json's count.

Receipt rows: one per parameter dtype, then ``"all"``: ``dtype`` (str), ``elements`` (count),
``bytes`` (B).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercourse import fmt
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.registry import AWQ_GROUP_SIZE, COURSE_MODEL, model
from infercourse.transformer import awq_weight_bytes, linear_weight_count, param_count, weight_bytes

BYTES_TOLERANCE = 0.001
"""An unquantised model's parameter bytes must equal N x (bytes per element) within 0.1 %. The
count is exact (vLLM's fused q/k/v and gate/up matrices hold the same elements); the slack covers a
vocabulary padded to a multiple of 64 rows (none for Qwen2.5-7B's 152,064 = 64 x 2,376, or for the
tiny test model's 512)."""


def predicted_bytes(config: Mapping[str, Any], run_dtype: str = "auto") -> float | None:
    """Parameter bytes predicted from ``config`` (B), or None for a quantisation other than AWQ.

    Unquantised: :func:`~infercourse.transformer.param_count` x the run's bytes per element;
    AWQ: :func:`~infercourse.transformer.awq_weight_bytes` at the config's group size.
    """
    quant = config.get("quantization_config")
    if quant is None:
        return param_count(config) * core.dtype_bytes(config, run_dtype)
    if quant.get("quant_method") == "awq":
        return awq_weight_bytes(config, quant.get("group_size", AWQ_GROUP_SIZE))
    return None


@core.claim
def bytes_match_config(receipt: core.Receipt) -> core.ClaimResult:
    """The "all" row's bytes against :func:`predicted_bytes` (unquantised: within BYTES_TOLERANCE)."""
    statement = (
        f"the parameter bytes equal the count from config.json x bytes per element, within {BYTES_TOLERANCE:.1%}"
    )
    config = core.model_config_for(receipt)
    if config is None:
        return core.ClaimResult(
            "parameter_bytes_match_config", statement, None, "model config not found: nothing to compare"
        )
    want = predicted_bytes(config, receipt.get("dtype", "auto"))
    if want is None or config.get("quantization_config") is not None:
        return core.ClaimResult(
            "parameter_bytes_match_config",
            statement,
            None,
            "quantised model: repacking may change the layout; compared by eye on the page",
        )
    got = core.find_row(receipt, dtype="all")["bytes"]
    detail = f"measured {got:,} B, predicted {want:,.0f} B ({got / want - 1:+.4%})"
    if _repacked_on_cpu(receipt, got, want):
        # vLLM's CPU build hands the decoder's linear weights to its CPU GEMM kernels (oneDNN, sgl, zentorch)
        # and leaves empty Parameters in their place (layers/utils.py, dispatch_cpu_unquantized_gemm); what is
        # left in model.parameters() must then be exactly N minus those weights, counted in elements (the sgl
        # kernel keeps those layers' biases in float32, on CPUs that have it, so the bytes vary by machine)
        rest = param_count(config) - linear_weight_count(config)
        elements = core.find_row(receipt, dtype="all")["elements"]
        return core.ClaimResult(
            "parameter_bytes_match_config",
            statement,
            elements == rest,
            f"{detail}; CPU build: linear weights repacked outside parameters(), the rest holds "
            f"{elements:,} elements, predicted exactly {rest:,}",
        )
    return core.ClaimResult("parameter_bytes_match_config", statement, abs(got / want - 1) <= BYTES_TOLERANCE, detail)


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """The "all" row's elements beside :func:`~infercourse.transformer.param_count`, less
    :func:`~infercourse.transformer.linear_weight_count` where vLLM's CPU build repacked them (exact; unquantised)."""
    config = core.model_config_for(receipt)
    if config is None or config.get("quantization_config") is not None:
        return []  # as the claim: no config to count, or a quantised layout not counted in elements
    want_bytes = predicted_bytes(config, receipt.get("dtype", "auto"))
    assert want_bytes is not None  # unquantised: predicted_bytes returns a number
    repacked = _repacked_on_cpu(receipt, core.find_row(receipt, dtype="all")["bytes"], want_bytes)
    held = param_count(config) - (linear_weight_count(config) if repacked else 0)
    return core.compare_rows(
        receipt, "parameters held", "elements", "elements", lambda row: held, where=lambda row: row["dtype"] == "all"
    )


def _repacked_on_cpu(receipt: core.Receipt, got: int, want: float) -> bool:
    """A CPU receipt whose parameters miss more than BYTES_TOLERANCE of the prediction: vLLM's CPU build
    moved the linear weights into its GEMM kernels' own buffers."""
    return receipt["machine"].get("kind") == "cpu" and abs(got / want - 1) > BYTES_TOLERANCE


@core.claim
def one_dtype(receipt: core.Receipt) -> core.ClaimResult:
    """An unquantised model's parameters all have the run's dtype (one dtype row besides "all")."""
    statement = "an unquantised model holds every parameter in one dtype, the run's"
    config = core.model_config_for(receipt)
    if config is None or config.get("quantization_config") is not None:
        return core.ClaimResult("single_dtype", statement, None, "quantised or unknown model")
    want_bytes = predicted_bytes(config, receipt.get("dtype", "auto"))
    assert want_bytes is not None  # unquantised: predicted_bytes returns a number
    if _repacked_on_cpu(receipt, core.find_row(receipt, dtype="all")["bytes"], want_bytes):
        return core.ClaimResult(
            "single_dtype",
            statement,
            None,
            "vLLM's CPU build repacked the linear layers (and may keep "
            "their biases in float32 for its GEMM kernel): checked on GPU receipts",
        )
    dtypes = [r["dtype"] for r in receipt["results"] if r["dtype"] != "all"]
    want = {1: "float8", 2: "bfloat16", 4: "float32"}.get(core.dtype_bytes(config, receipt.get("dtype", "auto")))
    ok = len(dtypes) == 1 and dtypes[0] == want
    return core.ClaimResult("single_dtype", statement, ok, f"dtypes held: {', '.join(dtypes)}")


def prediction(model_name: str = COURSE_MODEL) -> str:
    """Markdown: the course's model's parameter bytes in BF16 and in AWQ 4-bit."""
    config = model(model_name).config
    bf16, awq = weight_bytes(config, 2), awq_weight_bytes(config, AWQ_GROUP_SIZE)
    return "\n".join(
        [
            f"{model_name} has N = {fmt.count(param_count(config))} parameters (lesson 0C's count from config.json). "
            "A GPU changes nothing here: these are bytes, not times.",
            "",
            "| model | parameter bytes | GB | GiB |",
            "|---|---:|---:|---:|",
            f"| {model_name} (BF16) | {fmt.count(bf16)} | {fmt.gb(bf16)} | {fmt.gib(bf16)} |",
            f"| {model_name}-AWQ (4-bit, G = {AWQ_GROUP_SIZE}) | about {fmt.count(awq)} "
            f"| {fmt.gb(awq)} | {fmt.gib(awq)} |",
        ]
    )


# --- the notebook's exercises ----------------------------------------------------------------------


def _cfg() -> Mapping[str, Any]:
    return model(COURSE_MODEL).config


EXERCISES = (
    Exercise(
        f"How many parameters does {COURSE_MODEL}'s `config.json` describe (N)?",
        lambda: param_count(_cfg()),
        "parameters",
        "The embedding (V × d) and the untied output head (d × V), then per layer the attention's q, k, v (with "
        "biases) and o, the MLP's three d × d_ff matrices and two norms, and the final norm (lesson 0C).",
        rel_tol=0.02,
    ),
    Exercise(
        "Its weights in BF16, in GB (10⁹ bytes each)?",
        lambda: weight_bytes(_cfg(), 2) / 1e9,
        "GB",
        "N × 2 bytes: every parameter is one BF16 number (lesson 0C).",
        rel_tol=0.02,
    ),
    Exercise(
        f"The same model with AWQ 4-bit linear weights, groups of {AWQ_GROUP_SIZE}: how many GB?",
        lambda: awq_weight_bytes(_cfg(), AWQ_GROUP_SIZE) / 1e9,
        "GB",
        f"A quantised weight costs 4 bits plus its share of the group's 16-bit scale and 4-bit zero point: "
        f"0.5 + 2.5 / {AWQ_GROUP_SIZE} = {0.5 + 2.5 / AWQ_GROUP_SIZE:g} B; the embedding, the output head, biases and "
        "norms stay 16-bit (lesson 0C).",
        rel_tol=0.05,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("dtype",),
    header="elements",
    prediction_basis="config.json's parameter count",
    columns=(
        core.Column.text("dtype"),
        core.Column.count("elements"),
        core.Column.count("bytes"),
        core.Column("bytes", "GiB", lambda v: fmt.gib(v)),
    ),
    work=core.LabWork(engines=1, decode_steps=0, peak_kv_tokens=core.lab_settings("weights").MAX_MODEL_LEN),
)
