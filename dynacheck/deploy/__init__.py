"""What the user runs, as facts the static walk evaluates (see docs/deployment.md)."""
