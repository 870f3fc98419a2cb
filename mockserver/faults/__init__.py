"""Faults: the catalogue and its grammar, rules, the injector at the edge, stream faults, latency,
rate limits and the journal."""
