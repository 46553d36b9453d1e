"""The GitHub API client only (githubkit underneath): App auth, the installation client, retries,
pages, models, errors, labels and App setup. The lowest stage beside the store."""
