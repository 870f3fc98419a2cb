"""Wire models (pydantic v2), one module per endpoint family. Only the HTTP edge uses them."""
