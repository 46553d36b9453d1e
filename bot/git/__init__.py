"""git on the host: the one git wrapper, the worktree guard, the bare mirror and its checkouts.

May import the top-level modules (log, settings, redact) and the job fence; nothing of the flow.
"""
