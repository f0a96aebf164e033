"""The fast loop stays fast: every collected test that uses a heavy fixture carries its marker
(set in conftest.py), so `make check` (-m "not build and not browser and not lab") deselects it."""

from __future__ import annotations

HEAVY = {"build": "build", "site": "build", "server": "build", "browser": "browser", "lab_setup": "lab"}
"""Written here again on purpose: the test checks conftest's mapping, not itself."""


def test_every_test_that_needs_a_heavy_fixture_carries_its_marker(request):
    unmarked = [
        f"{item.nodeid} uses {fixture} but is not marked {marker}"
        for item in request.session.items
        for fixture, marker in HEAVY.items()
        if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None
    ]
    assert not unmarked, "\n".join(unmarked)
