"""The JobQueue contract and its backends."""
