"""The `fix` workflow: its engine workflow, the flow that runs it for an issue, and the branch and
pull request it pushes. Imports runs, publish, git and the store."""
