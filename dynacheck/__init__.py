"""dynacheck: find where PyTorch Dynamo will break in an LLM-serving stack, why, and how to fix it."""

__version__ = "0.1.0"
