"""Everything that talks to GitHub: App auth, checkout, context, publishing."""
