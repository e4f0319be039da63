"""Lambda entry points only: thin modules that build the app and wrap it."""
