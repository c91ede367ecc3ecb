"""kaio's version (kept in step with pyproject.toml). A foundation module of its own, so the
compile cache's keys and the PTX header can carry it without importing the package."""

__version__ = "0.1.0"
