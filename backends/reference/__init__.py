"""Reference backend."""
