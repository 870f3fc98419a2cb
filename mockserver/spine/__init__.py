"""The generation spine: the request, its events, the one fold, the backend contract.

No HTTP and no torch here: ``request`` (what is asked), ``events`` (what comes back),
``result`` (the one fold), ``backend`` (the contract), ``seeding`` (seeds and ids) and
``stopping`` (stop strings, UTF-8 edges). The engine that runs the backends under the faults
sits above both (:mod:`mockserver.engine`).
"""
