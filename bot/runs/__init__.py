"""Runs: the worker pool, the run executor, progress, model-free replies, leftovers and the
installation lifecycle. Below the workflows: the executor reaches them through the wiring."""
