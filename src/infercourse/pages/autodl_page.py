"""Values of the AutoDL quickstart: the instance, where files go, the commands (from
:mod:`infercourse.autodl`), the time and yuan of every lab (from :mod:`infercourse.labbox`'s
estimate and the registry's price), and the receipt folder of each GPU name."""

from __future__ import annotations

from infercourse import autodl, course, labbox, labs, registry, snippets, transformer
from infercourse.pages import PageValues, fact_link

P = PageValues("autodl.md")
rent = registry.AUTODL_RTX_4090


def _fence(text: str) -> str:
    """A shell block as Markdown (the page shows the command strings exactly as tests check them)."""
    return f"```bash\n{text}\n```"


P.add("card", registry.gpu(rent.card), "record")
P.add("vllm_gpu_version", registry.VLLM_GPU_VERSION, "text")
P.add("min_driver", labbox.LABKIT_MIN_DRIVER, "count")
P.add("data_disk", autodl.DATA_DISK, "text")
P.add("system_disk_gb", autodl.SYSTEM_DISK_GB, "count")
P.add("data_disk_min_gb", autodl.DATA_DISK_MIN_GB, "count")
P.add("docs_env", f"[{autodl.DOCS_ENV.where}]({autodl.DOCS_ENV.url})", "text")
P.add("cache_env", [{"name": k, "path": path, "what": what} for k, (path, what) in autodl.CACHE_ENV.items()], "record")
P.add("modelscope_hub_version", autodl.MODELSCOPE_HUB_VERSION, "text")
P.add("course_model", autodl.COURSE_MODEL, "text")

# What the labs download, once each (labs.lab_models: each lab script's models): the course's model in BF16,
# lab 3A's AWQ checkpoint, 6A's draft (8A's model too), 7B's mixture of experts in BF16.
cfg = registry.model(autodl.COURSE_MODEL).config
awq_model = snippets.constant("labs/quant_nll.py", "AWQ_MODEL")
lesson_pages = {lesson["code"]: lesson["page"] for lesson in course.live_lessons()}  # in course order
names = sorted(labs.wired(), key=lambda lab: list(lesson_pages).index(labs.spec(lab).lesson))
loaders: dict[str, list[str]] = {}
for lab in names:
    for model_id in labs.lab_models(lab):
        loaders.setdefault(model_id, []).append(labs.spec(lab).lesson)
downloads = [
    (
        model_id,
        "every other lab"
        if model_id == autodl.COURSE_MODEL
        else ("labs " if len(codes) > 1 else "lab ") + ", ".join(codes),
        transformer.awq_weight_bytes(cfg, registry.AWQ_GROUP_SIZE)
        if model_id == awq_model
        else transformer.weight_bytes(registry.model(model_id).config),
    )
    for model_id, codes in sorted(loaders.items(), key=lambda item: item[0] != autodl.COURSE_MODEL)
]
P.add(
    "downloads",
    [{"model": m, "who": who, "bytes": b, "minutes": b / (rent.download_mb_s * 1e6) / 60} for m, who, b in downloads],
    "record",
)
P.add("model_bytes", downloads[0][2], "B")
download_bytes = P.add("download_bytes", sum(b for _, _, b in downloads), "B")
extra_download_min = sum(b for _, _, b in downloads[1:]) / (rent.download_mb_s * 1e6) / 60
extra_labs = sorted({code for model_id, codes in loaders.items() if model_id != autodl.COURSE_MODEL for code in codes})
P.add("extra_download_labs", ", ".join(extra_labs[:-1]) + " and " + extra_labs[-1], "text")

# Time and yuan: scripts/run_labs.py's estimate (labbox.lab_minutes), priced at the registry's rate.
rows = []
for lab in names:
    page = lesson_pages[labs.spec(lab).lesson]
    run_min = labbox.lab_minutes(lab)["run"]
    rows.append(
        {
            "lab": lab,
            "lesson": course.lesson_label(page),
            "page": page,
            "minutes": run_min,
            "cards": labbox.lab_work(lab).gpus,
            "cny": labbox.lab_cny(lab, run_min),
        }
    )
P.add("lab_rows", rows, "record")
first_download_min = P.add("first_download_min", labbox.lab_minutes(names[0])["download"], "min")
P.add("extra_download_min", extra_download_min, "min")
P.add("first_download_cny", first_download_min / 60 * rent.cny_per_hour, "CNY")
P.add("extra_download_cny", extra_download_min / 60 * rent.cny_per_hour, "CNY")
total_min = P.add("total_min", sum(r["minutes"] for r in rows) + first_download_min + extra_download_min, "min")
P.add(
    "total_cny",
    sum(r["cny"] for r in rows) + (first_download_min + extra_download_min) / 60 * rent.cny_per_hour,
    "CNY",
)
P.add("cny_per_hour", rent.cny_per_hour, "CNY")
P.add("price_source", fact_link("autodl-rtx-4090", ""), "text")
P.add("download_mb_s", rent.download_mb_s, "count")
P.add("engine_start_min", rent.engine_start_min, "min")
P.add("decode_efficiency", labbox.DECODE_EFFICIENCY_ASSUMED, "1")

# Receipt folders: the name nvidia-smi gives a card, and the folder its receipts go to.
P.add(
    "folders",
    [
        {"device": d, "folder": labs.machine_slug({"kind": "gpu", "name": d})}
        for d in (autodl.LAB_CARD_DEVICE_NAME, "NVIDIA GeForce RTX 4090 D", "NVIDIA H100 80GB HBM3")
    ],
    "record",
)

P.add("check_block", _fence(autodl.CHECK_BLOCK), "text")
P.add("env_block", _fence(autodl.ENV_BLOCK), "text")
P.add("pip_block", _fence(autodl.PIP_BLOCK), "text")
P.add("install_block", _fence(autodl.INSTALL_BLOCK), "text")
P.add("download_block", _fence(autodl.DOWNLOAD_BLOCK), "text")
P.add("tmux_install", _fence(autodl.TMUX_INSTALL), "text")
P.add("run_block", _fence(autodl.RUN_BLOCK), "text")
P.add(
    "contribute_block",
    _fence(autodl.contribute_block(labs.machine_slug({"kind": "gpu", "name": autodl.LAB_CARD_DEVICE_NAME}))),
    "text",
)
P.add("failure_blocks", {k: _fence(v) for k, v in autodl.FAILURE_COMMANDS.items()}, "record")
