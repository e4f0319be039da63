"""The local stack: the embedded emulator and helpers to run the server."""
