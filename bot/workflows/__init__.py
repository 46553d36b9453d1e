"""Built-in workflows, written with the engine."""
