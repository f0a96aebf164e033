"""Build-time figures: a matplotlib figure as SVG text a page can embed.

(The lesson snippets carry their own few lines for this, so a learner can copy one file and run it.)
"""

from __future__ import annotations

import io


def svg_text(fig) -> str:
    """Lay out ``fig``, render it as SVG without a date (the same bytes on every build), close it, and
    return the ``<svg>`` element without the XML prolog, ready to sit inside HTML."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]
