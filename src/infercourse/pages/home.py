"""Values of the home page: the learning path and whether any GPU receipt is committed yet."""

from __future__ import annotations

from infercourse import course, labs
from infercourse.pages import baseline

P = baseline("index.md")
P.add("parts", course.parts(), "record")
P.add("no_gpu_receipts", not labs.gpu_receipts(), "record")
