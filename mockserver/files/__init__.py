"""OpenAI's Files and Uploads: bytes kept on the State, so a fleet shares them."""
