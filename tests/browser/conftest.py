"""The fixtures every real-browser test shares: one headless Chromium per module, one page per test.

A module sets ``PAGE_SIZE = (width, height)`` to change the page's viewport (1400 × 1100 by default).
The page's last state is saved under ``SHOTS`` (``test-artifacts/browser/``) when the test ends, also
on failure, named after the module and the test.
"""

from __future__ import annotations

import pytest

from tests.helpers.labserver import SHOTS, launched_chromium, watched_page

EXPECT_MS = 120_000  # a kernel starting under a loaded CI machine can take a minute


@pytest.fixture(scope="module")
def browser():
    with launched_chromium(EXPECT_MS) as b:
        yield b


@pytest.fixture
def page(browser, request):
    width, height = getattr(request.module, "PAGE_SIZE", (1400, 1100))
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg = watched_page(browser, width, height, EXPECT_MS)
    yield pg
    stem = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    pg.screenshot(path=str(SHOTS / f"{stem}_final_{request.node.name}.png"), full_page=True)
    pg.close()
