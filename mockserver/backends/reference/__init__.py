"""The reference backend: the tiny GPT run off the event loop (runtime, decoding, sampling, best_of, pooling).

No torch: :class:`~mockserver.backends.reference.runtime.Runtime` reads the weights with NumPy and the
project's kernels compute them (torch defines and trains the model, outside serving).
"""
