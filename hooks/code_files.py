"""MkDocs hook: publish each snippet whole, as ``code/<path under snippets/>`` (a lesson's file, e.g.
``code/lesson_2a/decode_roofline.py``; each lab script, ``code/labs/<lab>.py``, and each part of the labs'
shared ``labkit`` package, ``code/labs/labkit/<part>.py``), so that a lesson can show excerpts
(pymdownx.snippets sections, :func:`infercourse.snippets.excerpts`) and link the whole file one click away.

The files are the sources themselves, copied on every build (and every ``mkdocs serve`` rebuild), so
the download is always what the excerpts were cut from.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File


def on_files(files, config):
    root = Path(config.config_file_path).parent / "snippets"
    for script in sorted([*root.glob("*/*.py"), *root.glob("labs/labkit/*.py")]):
        name = script.relative_to(root).as_posix()
        files.append(File.generated(config, f"code/{name}", abs_src_path=str(script)))
    return files
