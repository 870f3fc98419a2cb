"""Cassettes: the vcrpy format, files on disk, matching, redaction, refolding and replay order."""
