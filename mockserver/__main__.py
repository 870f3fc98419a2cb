"""``python -m mockserver`` is the ``mockserver`` command."""

from mockserver.cli import main

raise SystemExit(main())
