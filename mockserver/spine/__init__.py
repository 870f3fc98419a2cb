"""The generation spine: the request, its events, the one fold, the backend contract, the engine.

No HTTP and no torch here: ``request`` (what is asked), ``events`` (what comes back),
``result`` (the one fold), ``backend`` (the contract), ``engine`` (backends under the wrappers
every answer gets), ``seeding`` (seeds and ids) and ``stopping`` (stop strings, UTF-8 edges).
"""
