"""Values of the Receipts page: every committed receipt (``receipts/<machine>/<lab>.json``), per machine
and per lab, beside its lesson's prediction; the CPU reference runs labelled as such."""

from __future__ import annotations

from infercourse import course, labs, registry
from infercourse.labs import RECEIPTS_DIR, prediction_label
from infercourse.pages import PageValues

P = PageValues("receipts.md")

CPU_INTRO = "**CPU run of the tiny model: shape, not GPU numbers.**"
"""The words above every table of CPU receipts: they prove the lab runs end to end and show the
table's shape; their times belong to a shared CPU and a random 2-layer model."""

_lesson_page = {lesson["code"]: lesson["page"] for lesson in course.live_lessons()}
receipts = [labs.load_receipt(path) for path in sorted(RECEIPTS_DIR.glob("*/*.json"))]

machines: dict[str, dict] = {}
for r in receipts:
    slug = labs.machine_slug(r["machine"])
    m = machines.setdefault(
        slug,
        {
            "folder": slug,
            "name": r["machine"]["name"],
            "kind": r["machine"]["kind"],
            "driver": r["machine"].get("driver") or "-",
            "cuda": r["machine"].get("cuda_driver_api") or "-",
            "vllm": set(),
            "torch": set(),
            "dates": set(),
            "labs": 0,
        },
    )
    m["vllm"].add(r["versions"]["vllm"])
    m["torch"].add(r["versions"]["torch"])
    m["dates"].add(r["date_utc"][:10])
    m["labs"] += 1
P.add(
    "machines",
    [
        {
            **m,
            "vllm": ", ".join(sorted(m["vllm"])),
            "torch": ", ".join(sorted(m["torch"])),
            "dates": ", ".join(sorted(m["dates"])),
        }
        for m in machines.values()
    ],
    "record",
)
P.add("gpu_receipt_count", sum(r["machine"]["kind"] == "gpu" for r in receipts), "count")
P.add("cpu_intro", CPU_INTRO, "text")
cpu_vllm = sorted({r["versions"]["vllm"] for r in receipts if r["machine"]["kind"] == "cpu"})
P.add("cpu_vllm", ", ".join(cpu_vllm) or "-", "text")
P.add("vllm_gpu_version", registry.VLLM_GPU_VERSION, "text")

sections = []
for lab in sorted(labs.wired(), key=lambda lab: list(_lesson_page).index(labs.spec(lab).lesson)):  # course order
    spec = labs.spec(lab)
    mine = [r for r in receipts if r["lab"] == lab]
    page = _lesson_page[spec.lesson]
    sections.append(
        {
            "lab": lab,
            "lesson": course.lesson_label(page),
            "lesson_page": page,
            "prediction": f"{prediction_label(spec)} {spec.prediction()}",
            "gpu_table": labs.measured_table(spec, [r for r in mine if r["machine"]["kind"] == "gpu"]),
            "cpu_table": labs.measured_table(spec, [r for r in mine if r["machine"]["kind"] == "cpu"], CPU_INTRO)
            if any(r["machine"]["kind"] == "cpu" for r in mine)
            else "",
        }
    )
P.add("sections", sections, "record")
