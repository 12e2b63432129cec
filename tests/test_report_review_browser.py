"""What the first screen of the HTML review shows in headless Chromium: the fix plan, a lead chain, its fix.

Skips cleanly without Debian's chromium or the playwright package (see test_report_browser.py).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
CHROMIUM = os.environ.get("DYNACHECK_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.model import Review  # noqa: E402
from dynacheck.report.html import render_html  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        try:
            instance = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        except Exception as exc:  # a chromium that cannot start here is an environment gap, not a bug
            pytest.skip(f"chromium did not start: {exc}")
        yield instance
        instance.close()


def open_page(browser, html: str, path: Path):
    path.write_text(html, encoding="utf-8")
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors


def in_first_screen(locator) -> bool:
    box = locator.bounding_box()
    return box is not None and locator.is_visible() and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"]


def many_chain_scan():
    """The flagship site reached by five chains, plus the logging site: two rows, not six."""
    base = samples.flagship_finding()
    chains = [replace(base, chain=base.chain[i:], fingerprint=f"fp{i}", entry=f"e{i}") for i in range(5)]
    return replace(samples.flagship_scan(), findings=(*chains, samples.logging_finding()))


def test_first_screen_shows_the_plan_a_lead_chain_and_its_fix(browser, tmp_path):
    page, errors = open_page(browser, render_html(Review(scan=many_chain_scan())), tmp_path / "review.html")
    assert errors == []
    plan = page.locator("#plan")
    assert in_first_screen(plan) and "custom_op" in plan.inner_text()
    rows = page.locator("details.finding")
    assert rows.count() == 2  # one row per site
    first = rows.first
    assert first.evaluate("e => e.open")
    assert in_first_screen(first.locator("li.hop").first)
    fix = first.locator(".first-fix")
    assert in_first_screen(fix) and "custom_op at flashinfer.fp4_quantization.fp4_quantize" in fix.inner_text()
    second = rows.nth(1)  # a closed row still shows its lead chain and its fix
    assert not second.evaluate("e => e.open") or second.locator(".chain-line").is_visible()
    assert second.locator(".chain-line").is_visible() and "→" in second.locator(".chain-line").inner_text()
    others = first.locator("details.other-chains")
    assert "4 other chain(s) to this site" in others.locator("summary").inner_text()
    assert not others.locator("li.alt-hop").first.is_visible()
    others.locator("summary").click()
    assert others.locator("li.alt-hop").first.is_visible()
    page.screenshot(path=str(tmp_path / "first-screen.png"))


def test_diff_page_has_chains_and_search(browser, tmp_path):
    page, errors = open_page(browser, render_html(None, diff=samples.sample_diff()), tmp_path / "diff.html")
    assert errors == []
    rows = page.locator("tr.diff-row")
    total = rows.count()
    assert total >= 3 and page.locator("details.diff-chain").count() >= 1
    visible = lambda: sum(1 for i in range(total) if rows.nth(i).is_visible())  # noqa: E731
    page.fill("#diff-q", "DC020")
    assert 1 <= visible() < total
    page.fill("#diff-q", "no such thing anywhere")
    assert visible() == 0
    page.fill("#diff-q", "")
    assert visible() == total
