"""The Postgres backend of the store: connections, schema, the store and its LISTEN wake-up.
It imports nothing above the store."""
