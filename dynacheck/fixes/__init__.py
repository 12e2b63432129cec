"""Fixes: choose the sound fix per finding, emit a patch module that applies it, verify by re-running."""
