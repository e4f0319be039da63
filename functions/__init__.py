"""Lambda entry points: thin modules that build the app and wrap it (`api`, `gc`, `sealer`,
`subscriptions`), and the invocation they are handed (`events`), which the local Lambda bridge
(`infra.lambda_bridge`) builds for them too."""

import os

# pydantic looks through every installed distribution's entry points for plugins the first time
# a model is built: 5 to 10 ms of each function's cold start, for plugins none of them uses. A
# deployment that adds one sets the variable itself ("" loads them all).
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
