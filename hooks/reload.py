"""MkDocs hook: every build imports the course package afresh, so `mkdocs serve` shows an edit to
src/infercourse on the next reload without a restart.

MkDocs serve reloads mkdocs.yml and its plugins on each rebuild, but Python keeps modules it has
imported: mkdocs-macros and the build-time snippets would keep reading the first `infercourse`
they saw. Dropping those modules before the plugins load (highest priority) makes them read the
files as they are now. (hooks/glossary.py binds its function when mkdocs.yml is loaded: an edit to
glossary.py itself still needs a restart; glossary.yml does not.)
"""

import sys

from mkdocs.plugins import event_priority


@event_priority(100)
def on_config(config):
    for name in [n for n in sys.modules if n == "infercourse" or n.startswith("infercourse.")]:
        del sys.modules[name]
    return config
