"""`python -m dynacheck` runs the same CLI as the console script.

Python puts the current folder first on `sys.path` for `-m`, so running this inside an untrusted
tree could import that tree's modules in place of dynacheck's dependencies. The folder is dropped
from the path before anything else is imported; the `dynacheck` console script never adds it and
is the recommended way to run the tool (docs/cache.md).
"""

import os
import sys

_here = os.getcwd()
sys.path[:] = [p for p in sys.path if p not in ("", ".", _here)]

from dynacheck.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
