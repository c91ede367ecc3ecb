"""Python frontend: ast -> kaio IR."""
