"""The JobQueue contract and its backends (SQLite, procrastinate on Postgres), and the job fence.
It imports nothing above the store."""
