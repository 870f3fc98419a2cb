"""``sqlite:PATH``: the SQLite engine, one file every server process on the host shares.

:mod:`~mockserver.state.sqlite.state` holds the state (:class:`~mockserver.state.base.State`),
:mod:`~mockserver.state.sqlite.records` the records (:class:`~mockserver.state.records.Store`),
:mod:`~mockserver.state.sqlite.connection` what the two share; their tables may share one file.
"""
