"""Training the reference model: the synthetic corpus and the training script (not part of the installed package)."""
