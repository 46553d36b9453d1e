"""Publication: an Outcome turned into GitHub text and writes (rendering, model-text cleaning,
hidden text, the idempotent publisher). Imports the GitHub client, never runs or workflows."""
