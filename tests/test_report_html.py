"""The HTML report: self-contained, escaped, source windows read at render time, every section present."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "report"))
import report_samples as samples  # noqa: E402

from dynacheck.model import Review  # noqa: E402
from dynacheck.report import render  # noqa: E402
from dynacheck.report.html import render_html  # noqa: E402


class _Page(HTMLParser):
    """Collects what the tests look at: script bodies, finding items, marked source lines, resource urls."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.findings: list[dict[str, str]] = []
        self.marked: list[str] = []
        self.urls: list[tuple[str, str, str]] = []
        self._in_script = False
        self._marked_depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        if tag == "details" and "finding" in (a.get("class") or ""):
            self.findings.append(a)
        if tag == "span" and "src-line" in (a.get("class") or "") and "marked" in (a.get("class") or ""):
            self._marked_depth = 1
            self.marked.append("")
        elif self._marked_depth and tag == "span":
            self._marked_depth += 1
        for key in ("src", "href", "action", "srcset", "poster", "data"):
            if key in a and tag != "details":
                self.urls.append((tag, key, a[key] or ""))

    @property
    def marked_code(self) -> list[str]:
        """Marked lines without their line-number gutter."""
        return [re.sub(r"^\d+", "", text).strip() for text in self.marked]

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False
        if tag == "span" and self._marked_depth:
            self._marked_depth -= 1

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data
        if self._marked_depth:
            self.marked[-1] += data


@pytest.fixture(scope="module")
def page_text() -> str:
    return render_html(samples.flagship_review(), diff=samples.sample_diff())


@pytest.fixture(scope="module")
def page(page_text) -> _Page:
    parsed = _Page()
    parsed.feed(page_text)
    return parsed


def test_scanned_markup_never_becomes_markup(page_text, page):
    # exactly one script element, ours: the </script> in banner.py did not open or close any
    assert len(page.scripts) == 1
    assert page_text.count("<script") == 1 and page_text.count("</script>") == 1
    assert "alert(&#39;pwned&#39;)" in page_text or "alert(&#x27;pwned&#x27;)" in page_text
    assert "&lt;/script&gt;&lt;script&gt;" in page_text
    assert "forward &lt;b&gt;" in page_text  # a title with a tag stays text
    assert "<b>tags</b>" not in page_text


def test_no_network_resources(page_text, page):
    assert 'http-equiv="Content-Security-Policy"' in page_text and "default-src 'none'" in page_text
    assert "@import" not in page_text and "url(" not in page_text
    external = [(tag, key, url) for tag, key, url in page.urls if re.match(r"^(https?:)?//", url)]
    # the only outbound references are links a reader may click: Dynamo's GB pages
    assert external and all(tag == "a" for tag, _, _ in external)
    assert {url for _, _, url in external} == {
        "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0007.html",
        "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html",
        "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0291.html",
        "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0124.html",
    }


def test_summary_counts_and_targets(page_text):
    assert "3 findings at 3 sites" in page_text
    assert 'id="count-fatal">3<' in page_text
    assert 'id="count-confirmed">1<' in page_text and 'id="count-seen_only">1<' in page_text
    assert "flashinfer-python" in page_text and "0.6.3" in page_text
    assert "sglang.srt.models.deepseek_v2:DeepseekV2Model.forward" in page_text
    assert "1 problem while reading the trees" in page_text


def test_findings_carry_filter_attributes(page):
    rules = [f["data-rule"] for f in page.findings]
    assert rules == ["DC001", "DC021", "DC020", "DC030", "GB0124"]
    first = page.findings[0]
    assert first["data-package"] == "flashinfer-python" and first["data-outcome"] == "graph_break"
    assert first["data-status"] == "confirmed"
    statuses = {f["data-rule"]: f["data-status"] for f in page.findings}
    assert statuses == {"DC001": "confirmed", "DC021": "predicted", "DC020": "predicted",
                        "DC030": "suppressed", "GB0124": "seen_only"}


def test_source_windows_are_read_from_the_target_roots(page_text, page):
    # a hop whose file exists shows context lines with the call marked
    assert "class MergedColumnParallelLinear(LinearBase):" in page_text
    assert "output = self.quant_method.apply(self, x, bias)" in page.marked_code
    assert '@functools.cache' in page_text
    # the hazard line itself, from flashinfer/jit/cpp_ext.py
    assert 'out = subprocess.check_output(["nvcc", "--version"])' in page.marked_code
    # deepseek_v2.py is not in the fixture tree: only the stored code line, still marked
    assert "gate_up, _ = self.gate_up_proj(x)" in page.marked_code
    assert "class DeepseekV2MLP" not in page_text


def test_source_windows_stay_small_and_inside_roots(tmp_path):
    (tmp_path / "secret.txt").write_text("TOP SECRET\n")
    tree = tmp_path / "tree"
    (tree / "sglang").mkdir(parents=True)
    (tree / "flashinfer").mkdir()
    review = samples.flagship_review(tree)
    finding = review.scan.findings[2]
    hop = replace(finding.chain[0], file="../../secret.txt", line=1, code="stored line only")
    scan = replace(review.scan, findings=(replace(finding, chain=(hop,)),))
    text = render_html(Review(scan=scan))
    assert "TOP SECRET" not in text and "stored line only" in text
    full = render_html(samples.flagship_review())
    windows = re.findall(r'<pre class="src" id="src\d+">(.*?)</pre>', full, re.S)
    assert windows and max(w.count('class="src-line') for w in windows) <= 7


def test_each_source_window_is_written_once_and_referenced_by_hops(page_text):
    """Chains share hops: the flagship and the logging finding both start at DeepseekV2Model.forward:2310."""
    ids = re.findall(r'<pre class="src" id="(src\d+)">', page_text)
    assert len(ids) == len(set(ids))
    slots = re.findall(r'<div class="src-slot" data-src="(src\d+)"></div>', page_text)
    assert set(slots) == set(ids)
    entry_window = next(i for i in ids if re.search(
        rf'id="{i}">[^\n]*?<span class="ln">2310</span>', page_text))
    assert slots.count(entry_window) == 2
    assert page_text.count("hidden_states, residual = layer(positions, hidden_states, forward_batch, residual)") == 1


def test_hop_reasons_dynamo_and_fixes(page_text):
    assert "via class hierarchy fallback — low confidence" in page_text
    assert "functools.cache: traced through" in page_text
    assert "Attempted to call function marked as skipped" in page_text
    assert "Dynamo developers have intentionally marked" in page_text
    assert "at threading.Lock() inside subprocess.Popen.__init__" in page_text
    sound = page_text.index("<b>custom_op</b>")
    unsound = page_text.index("<b>not prewarm</b>")
    assert sound < unsound  # sound fix first though the model listed it second
    assert "@torch.library.custom_op(&#34;dynacheck::fp4_quantize&#34;" in page_text


def test_trace_and_diff_views(page_text):
    assert "Trace: 2 processes" in page_text
    assert "pid 101 · rank 0 · 2 events · exit 0" in page_text
    assert "pid 102 · rank 1 · 1 event · killed" in page_text
    assert "Data-dependent branching &lt;if t.item() &gt; 0&gt; &amp; more" in page_text
    assert 'id="diff"' in page_text
    assert "1 added, 1 changed, 1 removed, 1 suppressed, 0 unchanged" in page_text


def test_light_and_dark_theme():
    text = render_html(samples.flagship_review(with_trace=False))
    assert "prefers-color-scheme: dark" in text and 'data-theme="dark"' in text
    assert 'id="theme-toggle"' in text
    assert 'id="trace"' not in text and 'id="diff"' not in text


def test_empty_review_and_diff_only_render():
    empty = render(Review(), "html")
    assert "dynacheck report" in empty and "finding" not in empty.split("<main>")[1].split("</main>")[0].lower()
    diff_only = render(samples.sample_diff(), "html")
    assert 'id="diff"' in diff_only and 'id="findings"' not in diff_only


def test_flagship_sized_report_stays_small():
    """Many findings sharing one long chain: the page grows linearly and stays far under 5 MB."""
    base = samples.flagship_finding()
    findings = tuple(replace(base, fingerprint=f"fp{i}", site=replace(base.site, line=base.site.line + i))
                     for i in range(300))
    scan = replace(samples.flagship_scan(), findings=findings)
    size = len(render_html(Review(scan=scan)).encode())
    assert size < 5 * 1024 * 1024


def test_backticked_names_become_code_and_nothing_else_does():
    base = samples.flagship_finding()
    evil = replace(base.fixes[1], summary="Wrap `fp4_quantize<script>` in a custom op <img src=x onerror=alert(1)>.")
    unpaired = replace(base.fixes[0], summary="Not `paired <i>x</i>.")
    scan = replace(samples.flagship_scan(), findings=(replace(base, fixes=(unpaired, evil)),))
    text = render_html(Review(scan=scan))
    assert "<code>fp4_quantize&lt;script&gt;</code> in a custom op &lt;img src=x onerror=alert(1)&gt;." in text
    assert "because not `paired &lt;i&gt;x&lt;/i&gt;." in text
    assert "<img" not in text and "<i>" not in text
    flagship = render_html(samples.flagship_review())
    assert "Guard the log call with <code>if not torch.compiler.is_compiling():</code>." in flagship
    assert "Avoid calling the function <code>Lock</code>." in flagship


def test_one_row_per_site_with_its_other_chains_inside():
    base = samples.flagship_finding()
    short = replace(base, chain=base.chain[5:], fingerprint="fp-short",
                    entry="flashinfer.fp4_quantization:fp4_quantize")
    scan = replace(samples.flagship_scan(), findings=(base, samples.logging_finding(), short))
    text = render_html(Review(scan=scan))
    assert text.count('<details class="finding') == 2  # two sites, not three chains
    row = text[text.index("2 chains to this site"):]
    row = row[:row.index('<details class="finding')]
    lead = row.index("from <span class=\"mono\">flashinfer.fp4_quantization:fp4_quantize</span> · 6 hops")
    other = row.index("1 other chain(s) to this site")
    assert lead < other  # the shortest chain leads; the longer one waits inside
    assert row.count('class="alt-hop') == len(base.chain)


def test_seen_only_event_gets_its_package_and_source(page_text):
    marker = 'data-rule="GB0124"'
    assert 'data-package="sglang" data-rule="GB0124"' in page_text
    item = page_text[page_text.index(marker):]
    item = item[: item.index("</details>")]
    assert "Seen at run time: Data-dependent branching" in item
    assert 'class="src-slot"' in item
    assert "# Dynamo cannot trace a Python branch on a tensor&#39;s value" in page_text


def test_conditional_sites_come_after_and_say_their_conditions():
    from dynacheck.model import Condition

    base = samples.flagship_finding()
    cond = replace(samples.logging_finding(), conditions=(Condition("server_args.enable_symm_mem", "x.py", 4),))
    text = render_html(Review(scan=replace(samples.flagship_scan(), findings=(cond, base),
                                           deployment={"name": "custom", "gpu": "sm120"})))
    assert text.index('data-rule="DC001"') < text.index('data-rule="DC020"')
    assert "only if: server_args.enable_symm_mem (x.py:4)" in text
    assert "1 conditional" in text


def test_deployment_facts_first_and_the_rest_folded():
    scan = replace(samples.flagship_scan(), deployment={"name": "glm5", "gpu": "sm120",
                                                        "runtime": {"is_capture_mode": False}})
    text = render_html(Review(scan=scan))
    head = text[text.index('id="deployment"'):]
    assert "name glm5, gpu sm120" in head[:head.index("</summary>")]
    assert "runtime: {is_capture_mode=False}" in head[head.index("</summary>"):]


def test_the_first_stop_and_the_way_dynamo_gets_there_are_on_the_first_screen():
    """Under fullgraph the first break is the one the user meets: the page says where, before the findings."""
    scan = samples.flagship_scan()
    chain = [{"function": h.function, "file": h.file, "line": h.line, "code": h.code} for h in scan.findings[0].chain]
    site = scan.findings[0].site
    first = {"function": site.function, "file": site.file, "line": site.line, "callee": site.callee,
             "rule": scan.findings[0].rule, "gb_id": "GB0007", "chain": chain}
    html = render_html(replace(scan, first_break=first))
    stop = html.index("Dynamo stops first at")
    assert stop < html.index('id="findings"')
    assert f"{site.file}:{site.line} {site.callee}" in html[stop:stop + 400]
    assert " → ".join([".".join(chain[0]["function"].split(".")[-2:])]) in html[stop:html.index('id="findings"')]
    assert "Dynamo stops first at" not in render_html(replace(scan, first_break={}))
