"""`python -m dynacheck` runs the same CLI as the console script."""

from dynacheck.cli import main

if __name__ == "__main__":
    main()
