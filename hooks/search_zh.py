"""Chinese search: the glossary's Chinese terms stay whole words in the search index.

Material's search plugin (9.8.2, ``material/plugins/search/plugin.py``) segments Chinese text with
jieba when jieba is installed, and puts a zero-width space (U+200B) around every word; the
``separator`` in ``mkdocs.yml`` splits on it, so each word is one token of the index, and the
search worker segments a Chinese query against those tokens. jieba's own dictionary does not know
every term of the field ("预填充" would become "预" + "填充"): this hook adds the Chinese words of
``glossary.yml`` (:func:`infercourse.glossary.chinese_words`) to it before any page is indexed.
"""

from __future__ import annotations

import logging

import jieba

jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict" lines in the build's output


def on_config(config):
    from infercourse import glossary  # imported per build: hooks/reload.py re-imports src/infercourse

    for word in glossary.chinese_words():
        jieba.add_word(word)
    return config
