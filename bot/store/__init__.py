"""The store: the storage contract, its SQLite and Postgres backends, the backend choice, body
segment files and the job queue. The lowest stage of the flow: it imports no other stage."""
