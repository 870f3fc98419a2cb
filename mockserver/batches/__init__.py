"""OpenAI's Batch API: a file of requests, each answered as the same request sent directly."""
