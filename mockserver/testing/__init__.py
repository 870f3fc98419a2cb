"""The pytest plugin (``plugin``), the test's handle on its server (``handle``), and the servers it runs."""
