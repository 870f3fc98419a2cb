"""Seeded fake JSON valid against a caller's JSON Schema, and the checks that say when a schema cannot be met."""
