"""Dynamic room: record what Dynamo really does in a run, merge processes, match with the scan.

`recorder` is loaded into traced processes (via `_inject/sitecustomize.py`) and imports nothing
heavy; `launch` runs the command, `merge` reads the event files back, `correlate` lines events
up with static findings.
"""
