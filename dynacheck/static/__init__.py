"""Static analysis: read sources with libcst, never import them, and predict what Dynamo does."""
