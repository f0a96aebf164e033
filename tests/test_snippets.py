"""Snippet files (``infercourse.snippets``): loading one as a module (what a wrong path tells the caller), and
the excerpts a page shows of one."""

from __future__ import annotations

import re

import pytest

from infercourse import snippets


def test_a_missing_snippet_names_the_folder():
    with pytest.raises(FileNotFoundError, match="no snippet at .*nope.py; paths are relative to"):
        snippets.load("labs/nope.py")


def test_a_file_that_is_not_python_is_refused_in_one_line():
    # snippets/labs/README.md exists; importlib finds no loader for it (was: 'NoneType' has no attribute 'loader')
    with pytest.raises(ValueError, match=r"README.md is not a Python module; load a snippet whose name ends in .py"):
        snippets.load("labs/README.md")


def test_excerpts_are_the_marked_sections_and_a_link_to_the_whole_file():
    code = snippets.excerpts("labs/tensor_parallel.py")  # two sections, in file order
    assert code.index('--8<-- "labs/tensor_parallel.py:shards"') < code.index('--8<-- "labs/tensor_parallel.py:engine"')
    assert code.endswith("[`snippets/labs/tensor_parallel.py`](../code/labs/tensor_parallel.py).")
    assert '--8<-- "labs/tensor_parallel.py"\n' not in code  # never the whole file
    # each excerpt is numbered as in the whole file: its first line there is the first line shown
    lines = (snippets.SNIPPETS_DIR / "labs" / "tensor_parallel.py").read_text(encoding="utf-8").splitlines()
    first = int(re.search(r'shards \(excerpt\)" linenums="(\d+)"', code).group(1))
    assert lines[first - 1].startswith("def rank_shapes(") and "[start:shards]" in lines[first - 2]


def test_a_lesson_snippet_s_excerpt_links_its_published_copy():
    code = snippets.excerpts("lesson_2a/decode_roofline.py")
    assert '--8<-- "lesson_2a/decode_roofline.py:floors"' in code
    assert code.endswith("[`snippets/lesson_2a/decode_roofline.py`](../code/lesson_2a/decode_roofline.py).")


def test_a_file_without_a_section_is_refused_with_the_fix(tmp_path, monkeypatch):
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "bare.py").write_text("print('no markers')\n")
    monkeypatch.setattr(snippets, "SNIPPETS_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"marks no section.*# --8<-- \[start:NAME\]"):
        snippets.excerpts("labs/bare.py")
    with pytest.raises(FileNotFoundError, match="no snippet at"):
        snippets.excerpts("labs/nope.py")
