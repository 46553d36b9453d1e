"""Operations: `bot doctor` and its checks, asking GitHub again for deliveries it could not
hand over, and backups of the embedded database. Imports the GitHub client, agents and the
store; no stage of the flow imports it."""
