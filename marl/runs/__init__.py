"""Run folders: layout, checkpoints (orbax + digests), the metrics log, the lock and folder-state rule,
the training loop and the one loader."""
