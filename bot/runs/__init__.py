"""Runs: the worker pool and `bot worker`'s health and metrics page, the run executor, the run's
context, progress, model-free replies, leftovers and the installation lifecycle. The flows come
from the wiring by name (`bot.runs.flows`)."""
