"""``redis://HOST:PORT/DB`` (and ``redis+cluster://…``, ``redis+sentinel://…``): the Redis engine,
shared by every process (and host) that names it.

:mod:`~mockserver.state.redis.state` holds the state (:class:`~mockserver.state.base.State`),
:mod:`~mockserver.state.redis.records` the records (:class:`~mockserver.state.records.Store`),
and :mod:`~mockserver.state.redis.client` makes the redis-py clients both speak through.
"""
