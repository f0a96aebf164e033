"""mkdocs-macros entry point: what a page may call inside ``{{ ... }}`` and ``{% ... %}``.

Pages compute their prose numbers next to the prose, from the registry, e.g.::

    {% set qwen = model(course_model).config %}
    Qwen2.5-7B has {{ param_count(qwen) | count }} parameters.

Nothing here holds a number of its own.
"""

from __future__ import annotations

from infercourse import course, labbox, labs, fmt, glossary, memory, registry, roofline, snippets, transformer


def define_env(env) -> None:
    """Register the registry, the formulas and the number formats with mkdocs-macros."""
    env.variables.update(
        {
            "models": registry.MODELS,
            "gpus": registry.GPUS,
            "course_model": registry.COURSE_MODEL,
            "lab_gpu": registry.LAB_GPU,
            "vllm_gpu_version": registry.VLLM_GPU_VERSION,
            "vllm_default_gpu_memory_utilization": registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
            "awq_group_size": registry.AWQ_GROUP_SIZE,
            "vllm_llm_default_max_num_batched_tokens": registry.VLLM_LLM_DEFAULT_MAX_NUM_BATCHED_TOKENS,
            "autodl": registry.AUTODL_RTX_4090,
            "gpu_memory_total_mib": registry.GPU_MEMORY_TOTAL_MIB,
            "vllm_non_kv_reserve_gib": registry.VLLM_NON_KV_RESERVE_GIB,
            "vllm_default_block_size": registry.VLLM_DEFAULT_BLOCK_SIZE,
        }
    )
    for function in (
        registry.model,
        registry.gpu,
        transformer.head_dim,
        transformer.param_breakdown,
        transformer.param_count,
        transformer.linear_weight_count,
        transformer.kv_bytes_per_token,
        transformer.kv_bytes_per_layer_token,
        transformer.kv_cache_bytes,
        transformer.sliding_window_layers,
        transformer.attention_kind,
        transformer.is_mla,
        transformer.weight_bytes,
        transformer.awq_weight_bytes,
        transformer.fp8_weight_bytes,
        transformer.attention_flops_per_token,
        transformer.forward_flops_per_token,
        roofline.ridge_point,
        roofline.time_floor,
        roofline.matmul_params,
        roofline.decode_step_floor,
        roofline.prefill_floor,
        roofline.attainable_flops,
        roofline.decode_bytes_per_step,
        roofline.decode_intensity,
        roofline.decode_intensity_limit,
        roofline.compute_bound_batch,
        roofline.linear_intensity,
        roofline.attention_intensity,
        roofline.matmul_params,
        roofline.decode_kernel_floors,
        roofline.decode_step_floor,
        roofline.prefill_floor,
        memory.device_total_bytes,
        memory.kv_budget_bytes,
        memory.kv_capacity_tokens,
        memory.max_concurrency,
        memory.device_total_upper_bytes,
        memory.max_sequences,
        labbox.lab_box,
        labs.gpu_receipts,
        glossary.entries,
        course.parts,
        course.lesson_label,
    ):
        env.macro(function)
    env.macro(snippets.load, "snippet")
    env.macro(snippets.constant, "snippet_constant")
    for name in ("count", "fixed", "gb", "gib", "pct", "ms"):
        env.filter(getattr(fmt, name), name)
