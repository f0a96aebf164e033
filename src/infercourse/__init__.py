"""Shared code of the LLM-inference course.

One importable place for what both the docs build and the tests read:

- :mod:`infercourse.registry`: input facts (model configs, GPU datasheet figures), each with its source.
- :mod:`infercourse.transformer`: parameter counts, KV bytes per token and weight bytes derived from a config.
- :mod:`infercourse.roofline`: ridge points and the roofline floors used for predictions.
- :mod:`infercourse.fmt`: how numbers are written on the pages (GB vs GiB, thousands separators).
- :mod:`infercourse.pages`: each page's named values (one module per page), computed from the above.
- :mod:`infercourse.macros`: the mkdocs-macros entry point: a page sees only its own values.
"""
