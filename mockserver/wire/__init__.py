"""The wire's leaf: JSON, header names and the ASGI-scope keys. Every floor may import it; it
imports nothing of mockserver's but :mod:`mockserver.errors` (as Starlette's ``datastructures``
and httpx's ``_models``: the small things everyone shares, kept where nobody has to climb)."""
