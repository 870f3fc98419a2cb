"""Every piece of mutable state a server keeps, behind one small interface (:mod:`mockserver.state.base`).

``--state memory`` (the default) keeps it in the process; ``sqlite:PATH`` in one file several
processes on one host share; ``redis://HOST:PORT/DB`` in a Redis any number of processes on any
number of hosts share. :func:`mockserver.state.open.open_state` picks one from the URL.

The Responses API's records (:mod:`mockserver.state.records`) live beside the state, one engine
per database: :mod:`~mockserver.state.memory` holds both of memory's, the packages
:mod:`~mockserver.state.sqlite` and :mod:`~mockserver.state.redis` a ``state`` and a ``records``
module each. Nothing here imports anything above it: only :mod:`mockserver.errors`,
:mod:`mockserver.clock` and :mod:`mockserver.wire` from outside.
"""
