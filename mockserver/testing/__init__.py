"""The pytest plugin (``plugin``), the test's handle on its server (``handle``), and the servers it runs."""

# How to get what the plugin's fixtures need (httpx2, the OpenAI SDK, pytest-asyncio): the package
# is not on the public index, so from a clone or a git URL.
PYTEST_EXTRA = (
    "the [pytest] extra: pip install -e '.[pytest]' in a clone of mockserver, "
    "or pip install 'mockserver[pytest] @ git+<this repository's URL>'"
)
