"""The HTTP edge: SSE framing, JSON bodies, path prefixes, auth, headers, metrics, the OpenAPI document."""
