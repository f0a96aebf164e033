"""Loading a snippet file as a module (``infercourse.snippets``): what a wrong path tells the caller."""

from __future__ import annotations

import pytest

from infercourse import snippets


def test_a_missing_snippet_names_the_folder():
    with pytest.raises(FileNotFoundError, match="no snippet at .*nope.py; paths are relative to"):
        snippets.load("labs/nope.py")


def test_a_file_that_is_not_python_is_refused_in_one_line():
    # snippets/labs/README.md exists; importlib finds no loader for it (was: 'NoneType' has no attribute 'loader')
    with pytest.raises(ValueError, match=r"README.md is not a Python module; load a snippet whose name ends in .py"):
        snippets.load("labs/README.md")
