"""Pull request review: local diffs, review memory, suggestions proven in worktrees, publication."""
