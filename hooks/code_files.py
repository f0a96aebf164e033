"""MkDocs hook: publish each lab script whole, as ``code/labs/<lab>.py`` (and each part of the labs'
shared ``labkit`` package as ``code/labs/labkit/<part>.py``), so that a lesson can show excerpts
(pymdownx.snippets sections) and link the whole file one click away.

Only the lab scripts and ``labkit`` are published: the lesson snippets are short and shown whole
on their pages. The files are the sources themselves, copied on every build (and every ``mkdocs
serve`` rebuild), so the download is always what the excerpts were cut from.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File


def on_files(files, config):
    labs = Path(config.config_file_path).parent / "snippets" / "labs"
    for script in sorted([*labs.glob("*.py"), *labs.glob("labkit/*.py")]):
        name = script.relative_to(labs).as_posix()
        files.append(File.generated(config, f"code/labs/{name}", abs_src_path=str(script)))
    return files
