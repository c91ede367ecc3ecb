"""``python -m kaio.conformance``: the same as ``kaio conformance``."""
import sys

from .cli import main

sys.exit(main())
