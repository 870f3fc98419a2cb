"""Answers the model must not make up: scripted rules, the tool policy, structured JSON, reasoning budgets."""
