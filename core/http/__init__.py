"""HTTP layer: stream endpoints, responses and middleware."""
