"""The edge: the one pass every request makes before the routes (:class:`Edge`)."""

from mockserver.edge.gate import Edge

__all__ = ["Edge"]
