"""The GitHub API client only (githubkit underneath): App auth, the installation client, retries,
pages, models, errors, labels and App setup. It imports only the store's job fence."""
