"""The Postgres backend: connections, schema, store and intake for scale-out deployments."""
