"""MkDocs hook: what the theme's HTML lacks for assistive technology.

Material's search panel is a ``role="dialog"`` without a name (axe: aria-dialog-name); it gets
``aria-label="Search"``. The build fails if the theme's markup changes so that this no longer applies.
"""

from mkdocs.exceptions import PluginError

SEARCH_DIALOG = '<div class="md-search" data-md-component="search" role="dialog">'


def on_post_page(output, page, config):
    if SEARCH_DIALOG not in output:
        if 'role="dialog"' in output:
            raise PluginError(f"{page.file.src_uri}: the theme's search dialog markup changed; update hooks/a11y.py")
        return output
    return output.replace(SEARCH_DIALOG, SEARCH_DIALOG[:-1] + ' aria-label="Search">')
