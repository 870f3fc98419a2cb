"""Faults: the catalogue and its grammar, rules, stream faults, content faults, latency, rate
limits and the journal. They depend on the spine's events and the state only; the edge
(:mod:`mockserver.edge.injection`) decides a request's faults, the engine applies them to its
events, and the SSE writer hands its frames through the stream faults."""
