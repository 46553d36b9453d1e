"""`bot action`: the app as a step of a GitHub Actions job (see `bot.action.runner`)."""
