"""The Responses API's state: stored records (memory or SQLite) and the lifecycle of runs."""
