"""Intake: the signed webhook route, its memory budget, group commit into the store (SQLite and
Postgres writers), receiver processes and the wake-up pipe. It may import the store, never runs."""
