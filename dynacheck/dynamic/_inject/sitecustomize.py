"""Loaded by Python at start-up in every process of a `dynacheck trace` run (PYTHONPATH).

Arms the dynacheck recorder (it waits for `import torch`), then runs the `sitecustomize` that
this one shadows, if any, so the user's own start-up hook still runs.
"""


def _dynacheck_arm() -> None:
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        _load_dynacheck_from(os.environ.get("DYNACHECK_ROOT", ""))
        from dynacheck.dynamic.recorder import activate

        activate()
    except Exception as exc:  # noqa: BLE001 - start-up must go on
        print(f"dynacheck: recorder not armed: {exc}", file=sys.stderr)
    _chain(here)


def _load_dynacheck_from(root: str) -> None:
    """Import the dynacheck that launched the trace (its folder, not sys.path: no other names leak)."""
    import importlib.machinery
    import importlib.util
    import sys

    if not root or "dynacheck" in sys.modules:
        return
    spec = importlib.machinery.PathFinder.find_spec("dynacheck", [root])
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["dynacheck"] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules["dynacheck"]
        raise


def _chain(here: str) -> None:
    """Find the next `sitecustomize` on sys.path (not this one) and execute it in this module."""
    import importlib.machinery
    import os
    import sys

    rest = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.origin is None or not spec.loader:
        return
    module = sys.modules[__name__]
    try:
        with open(spec.origin, "rb") as fh:
            code = compile(fh.read(), spec.origin, "exec")
        exec(code, module.__dict__)  # noqa: S102 - the user's own start-up hook, as Python would run it
    except Exception as exc:  # noqa: BLE001 - same as site.py: report and carry on
        print(f"Error in sitecustomize {spec.origin}: {exc}", file=sys.stderr)


_dynacheck_arm()
