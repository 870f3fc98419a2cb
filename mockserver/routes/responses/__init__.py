"""``/v1/responses``: the endpoints, the request codec and the narrator of events.

The store and the lifecycle of background runs are :mod:`mockserver.state.records` and :mod:`mockserver.lifecycle`.
"""
