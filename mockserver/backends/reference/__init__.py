"""The reference backend: the tiny GPT run off the event loop (runtime, decoding, sampling, best_of, pooling).

Importing this package imports torch lazily: only :class:`~mockserver.backends.reference.runtime.Runtime` loads it.
"""
