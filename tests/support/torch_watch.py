"""Watch a Python process for torch: a prelude for ``python -c`` that writes down every attempt to
import it (the module name and the stack that asked) to the file ``$TORCH_WATCH`` names. The
import itself goes on as usual, so a process that needs torch still works and is still caught."""

from __future__ import annotations

from pathlib import Path

__all__ = ["PRELUDE", "attempts"]

PRELUDE = """
import os as _os, sys as _sys, traceback as _traceback

class _TorchWatch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            with open(_os.environ["TORCH_WATCH"], "a") as out:
                out.write(name + "\\n" + "".join(_traceback.format_stack()) + "\\n")
        return None

_sys.meta_path.insert(0, _TorchWatch())
"""


def attempts(log: Path) -> str:
    """What the watched process tried to import of torch ('' when nothing)."""
    return log.read_text() if log.exists() else ""
