"""Where scanned code lives: targets resolved to folders of Python sources, never imported."""

from dynacheck.sources.cache import default_cache_dir
from dynacheck.sources.locate import ModuleLocator
from dynacheck.sources.resolve import resolve_target, resolve_targets

__all__ = ["ModuleLocator", "default_cache_dir", "resolve_target", "resolve_targets"]
