"""The operator's page: deliveries, runs, agent calls and costs, read through the store."""
