"""Values of the home page: the learning path, the lab card, and whether any GPU receipt is committed yet."""

from __future__ import annotations

from infercourse import course, labs, registry
from infercourse.pages import PageValues

P = PageValues("index.md")
P.add("vllm_gpu_version", registry.VLLM_GPU_VERSION, "text")
P.add("lab_gpu", registry.gpu(registry.LAB_GPU), "record")
P.add("parts", course.parts(), "record")
P.add("no_gpu_receipts", not labs.gpu_receipts(), "record")
