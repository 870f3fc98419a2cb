"""HTTP pieces, each one job: SSE framing, request bodies, path prefixes, auth rules, request
ids, limits, metrics, the connection under a response. Nothing here knows of faults or routes:
the edge (:mod:`mockserver.edge`) composes these steps, and stream faults reach the SSE writer
through :class:`~mockserver.wire.stream.FrameFilter`."""
