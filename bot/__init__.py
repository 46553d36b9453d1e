"""A GitHub App that turns repository events into autonomous agent runs."""

__version__ = "0.1.0"
