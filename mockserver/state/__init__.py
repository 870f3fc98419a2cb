"""Every piece of mutable state a server keeps, behind one small interface (:mod:`mockserver.state.base`).

``--state memory`` (the default) keeps it in the process; ``sqlite:PATH`` in one file several
processes on one host share; ``redis://HOST:PORT/DB`` in a Redis any number of processes on any
number of hosts share. :func:`mockserver.state.open.open_state` picks one from the URL.
"""
