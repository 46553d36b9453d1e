"""Intake: the signed webhook route, its memory budget, group commit into the store, body segments,
receiver processes and the wake-up pipe. It may import the store, never runs or workflows."""
