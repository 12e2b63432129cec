"""An import inside a try body that fails: what follows it in the body never runs. The framework
facts name the packages a stock install does not have (`absent_packages`); SGLang's XIELU sets its
CUDA kernel only after `import xielu.ops`, and its forward logs under compile only when it is set."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.static.scan import scan_roots
from dynacheck.static.summary import summarize

ROOT = Path(__file__).parent / "fixtures" / "deploy"
FACTS = ROOT / "depfx.toml"


def _logged(result) -> list[tuple[str, bool]]:
    return [(f.site.function.rpartition(".")[0].rpartition(".")[2], f.unconditional) for f in result.findings
            if f.site.callee.startswith("logging.")]


def test_what_follows_an_absent_package_s_import_never_runs(scan_cache):
    spec = DeploymentSpec(framework=FACTS, gpu="sm90", platform="cuda")
    fused = scan_roots([ROOT], ["depfx.optional:Fused.forward"], cache_dir=scan_cache, deployment=spec)
    other = scan_roots([ROOT], ["depfx.optional:Other.forward"], cache_dir=scan_cache, deployment=spec)
    assert _logged(fused) == []  # `self._kernel` is only ever None: the logging branch is never taken
    assert _logged(other) == [("Other", True)]  # nothing says `otherext` is absent: it may be set


def test_without_the_fact_the_optional_kernel_may_be_set(scan_cache, tmp_path):
    """The control: the same scan with framework facts that do not list the package."""
    facts = tmp_path / "facts.toml"
    facts.write_text(FACTS.read_text().replace('absent_packages = ["fancyext"]', "absent_packages = []"))
    spec = DeploymentSpec(framework=facts, gpu="sm90", platform="cuda")
    fused = scan_roots([ROOT], ["depfx.optional:Fused.forward"], cache_dir=scan_cache, deployment=spec)
    assert _logged(fused) == [("Fused", True)]


def test_the_import_guards_what_follows_it_in_the_try_body_only():
    source = (
        "def f():\n"
        "    before()\n"
        "    try:\n"
        "        import pkg.ops\n"
        "        from other.mod import thing\n"
        "        after()\n"
        "    except ImportError:\n"
        "        handler()\n"
        "    later()\n"
    )
    fn = summarize(source, "m", "m.py", False, defer=False).functions["f"]
    guards = {c.func[1]: [g[0] for g in c.guards] for c in fn.calls}
    assert guards["before"] == [] and guards["later"] == []
    assert guards["after"] == [("imp", "pkg.ops"), ("imp", "other.mod")]
    assert guards["handler"] == [("exc", 7)]


def test_dynamo_compiles_the_layer_whole_when_the_import_failed():
    """The oracle: with the package absent, `fullgraph=True` compiles the forward; with the kernel
    set, the logging call in the branch breaks the graph (as the scan says for `Other`)."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT))
    try:
        from depfx.optional import Fused
    finally:
        sys.path.remove(str(ROOT))
    torch._dynamo.reset()
    layer = Fused()
    x = torch.ones(3)
    assert torch.equal(torch.compile(layer, fullgraph=True, backend="eager")(x), x * 2)
    layer._kernel = lambda t: t + 1  # what an installed `fancyext` would have set
    torch._dynamo.reset()
    with pytest.raises(Exception, match="(?i)logger|logging|skip|Unsupported"):
        torch.compile(layer, fullgraph=True, backend="eager")(x)
