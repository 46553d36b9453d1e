"""The `review` workflow: its engine workflow and its effects (local diffs, review memory,
suggestions proven in worktrees, publication). Imports runs, publish, git and the store."""
