"""The tiny GPT and its byte-level BPE tokenizer, with the weights they ship with (``assets/``).

``model.py`` defines the network in torch (and trains it: ``python -m training.train``, outside
the runtime package; torch is in the ``train`` and ``test`` extras only); ``checkpoint.py`` reads
its saved weights with NumPy; ``kernels/`` defines the arithmetic that serving computes it with,
the same bits on every machine (NumPy, and a C copy built with the package); ``decoder.py``
runs sequences through that kernel. Serving and the tokenizer need no torch.
"""
