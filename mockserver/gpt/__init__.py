"""The tiny GPT and its byte-level BPE tokenizer, with the weights they ship with (``assets/``).

Built by ``python -m training.train`` (outside the runtime package). The tokenizer needs no torch.
"""
