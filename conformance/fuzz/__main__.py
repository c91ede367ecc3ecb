"""``python3 -m kaio.conformance.fuzz``: see :mod:`kaio.conformance.fuzz.cli`."""
import sys

from .cli import main

if __name__ == "__main__":   # spawned workers import this module too; only the parent runs
    sys.exit(main())
