"""Command-line entry points for the app's own areas."""
