"""The HTML report in headless Chromium: loads clean, filters, expands, and stays inert to scanned markup.

Needs Debian's `chromium` and the `playwright` Python package (never `playwright install`: the
system browser is driven through `executable_path`). Skips cleanly when either is missing.
Screenshots go to tmp_path and, when DYNACHECK_SCREENSHOT_DIR is set, there too.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
CHROMIUM = os.environ.get("DYNACHECK_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.model import ScanResult  # noqa: E402
from dynacheck.report import view  # noqa: E402
from dynacheck.report.html import render_html  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
RESOLVE = Path(__file__).parent / "fixtures" / "resolve"
ENTRY = "resfx.model:Model.forward"


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        try:
            instance = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        except Exception as exc:  # a chromium that cannot start here is an environment gap, not a bug
            pytest.skip(f"chromium did not start: {exc}")
        yield instance
        instance.close()


class Page:
    """A loaded report plus everything the page said or tried to fetch."""

    def __init__(self, browser, html: str, path: Path, color_scheme: str = "light") -> None:
        path.write_text(html, encoding="utf-8")
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 1000}, color_scheme=color_scheme)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(path.as_uri())
        self.page.wait_for_load_state("load")

    def visible_rules(self) -> list[str]:
        return [el.get_attribute("data-rule") for el in self.page.locator("details.finding").all()
                if el.is_visible()]

    def screenshot(self, tmp_path: Path, name: str) -> Path:
        shot = tmp_path / name
        self.page.screenshot(path=str(shot), full_page=True)
        target = os.environ.get("DYNACHECK_SCREENSHOT_DIR")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(target) / name)
        return shot


def _real_scan() -> ScanResult:
    scan_module = pytest.importorskip("dynacheck.static.scan", reason="the static engine is not in this tree")
    with tempfile.TemporaryDirectory() as cache:
        return scan_module.scan_roots([RESOLVE], [ENTRY], cache_dir=Path(cache))


def test_real_scan_report_loads_filters_and_expands(browser, tmp_path):
    scan = _real_scan()
    assert len({f.rule for f in scan.findings}) >= 2, "the fixture should fire several rules"
    page = Page(browser, render_html(scan), tmp_path / "report.html")
    assert page.errors == []
    assert all(url.startswith(("file:", "data:", "about:")) for url in page.requests), page.requests
    assert sorted(page.visible_rules()) == sorted(f.rule for f in scan.findings)

    # the subprocess hazard reached through a class-hierarchy fallback (a weak hop the page must mark)
    subprocess_finding = next(f for f in scan.findings if f.site.callee.startswith("subprocess.")
                              and any(view.hop_is_weak(h) for h in f.chain))
    rule = subprocess_finding.rule
    same_rule = [f for f in scan.findings if f.rule == rule]
    page.page.select_option("#filter-rule", rule)
    assert page.visible_rules() == [rule] * len(same_rule)
    assert page.page.locator("#shown-count").inner_text() == f"{len(same_rule)} of {len(scan.findings)} shown"

    index = view.sorted_findings(scan.findings).index(subprocess_finding)
    item = page.page.locator("details.finding").nth(index)
    assert item.get_attribute("data-rule") == rule
    assert not item.locator("li.hop").first.is_visible()
    item.locator(":scope > summary").click()
    hops = item.locator("li.hop")
    assert hops.count() == len(subprocess_finding.chain)
    assert all(hops.nth(i).is_visible() for i in range(hops.count()))
    hazard = item.locator("li.hop.hazard .src-line.marked")
    assert hazard.is_visible() and subprocess_finding.site.callee.split(".")[-1] in hazard.inner_text()
    assert str(subprocess_finding.site.line) in hazard.locator(".ln").inner_text()
    assert item.locator("li.hop .src-line").count() > len(subprocess_finding.chain)  # context read from the tree
    weak = item.locator("li.hop.weak")
    assert weak.count() >= 1 and "hierarchy fallback" in weak.first.inner_text()

    page.page.select_option("#filter-rule", "")
    assert len(page.visible_rules()) == len(scan.findings)
    shot = page.screenshot(tmp_path, "dynacheck-report-real-scan.png")
    assert shot.stat().st_size > 10_000
    assert page.errors == []


def test_scanned_markup_stays_inert_and_search_and_theme_work(browser, tmp_path):
    page = Page(browser, render_html(samples.flagship_review(), diff=samples.sample_diff()),
                tmp_path / "flagship.html", color_scheme="dark")
    assert page.errors == [] and page.dialogs == []
    assert page.page.locator("script").count() == 1
    banner = page.page.locator('details.finding[data-rule="DC021"]')
    if not banner.evaluate("e => e.open"):
        banner.locator(":scope > summary").click()
    assert "</script><script>alert('pwned')</script>" in banner.locator(".src-line.marked").first.inner_text()
    assert page.dialogs == []

    page.page.fill("#q", "get_cuda_version")
    assert page.visible_rules() == ["DC001"]
    page.page.fill("#q", "no such function anywhere")
    assert page.visible_rules() == [] and page.page.locator("#no-match").is_visible()
    page.page.fill("#q", "")
    page.page.select_option("#filter-status", "seen_only")
    assert page.visible_rules() == ["GB0124"]
    page.page.select_option("#filter-status", "")

    background = "getComputedStyle(document.body).backgroundColor"
    dark = page.page.evaluate(background)
    page.page.click("#theme-toggle")
    assert page.page.evaluate("document.documentElement.getAttribute('data-theme')") == "light"
    assert page.page.evaluate(background) != dark
    page.screenshot(tmp_path, "dynacheck-report-flagship-light.png")
    assert page.errors == []


@pytest.mark.wheels
@pytest.mark.slow  # over 10 s on 2 cores
def test_flagship_report_in_the_browser(browser, tmp_path, pinned_targets, scan_cache):
    """The GLM-5 report: find the fp4 -> nvcc chain by search, open it, see the marked subprocess line."""
    scan_module = pytest.importorskip("dynacheck.static.scan", reason="the static engine is not in this tree")
    scan = scan_module.scan_targets(pinned_targets, [], "glm5", cache_dir=scan_cache)
    html = render_html(scan)
    assert len(html.encode()) < 5 * 1024 * 1024
    page = Page(browser, html, tmp_path / "flagship.html")
    assert page.errors == []
    page.page.fill("#q", "fp4_quantization.fp4_quantize get_cuda_version check_output")
    hits = [el for el in page.page.locator("details.finding").all() if el.is_visible()]
    assert hits
    flagship = hits[0]
    flagship.locator(":scope > summary").click()
    assert "subprocess.check_output" in flagship.locator(":scope > summary").inner_text()
    marked = flagship.locator("li.hop.hazard .src-line.marked")
    assert marked.is_visible() and "check_output" in marked.inner_text()
    assert flagship.locator('a[href$="gb0007.html"]').is_visible()
    page.screenshot(tmp_path, "dynacheck-report-flagship-glm5.png")
    assert page.errors == []
