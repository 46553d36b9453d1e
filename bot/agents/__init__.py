"""The agent runtime: model loop, agent types, tools and the command sandbox."""
