"""Operations: `bot doctor` and its checks, and asking GitHub again for deliveries it could not
hand over. Imports the GitHub client, agents and the store; no stage of the flow imports it."""
