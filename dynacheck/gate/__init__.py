"""The CI gate: fingerprints stable across line moves, baselines, suppressions, dependency diffs."""
