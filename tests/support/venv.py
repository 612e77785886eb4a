"""A fresh virtual environment that borrows this interpreter's installed packages instead of downloading them."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

HERE_SITE = sysconfig.get_paths()["purelib"]  # this interpreter's site-packages (torch, grpcio, ...)


def fresh_venv(root: Path, *, process_pth: bool) -> Path:
    """Create a venv at ``root`` (no pip) that sees :data:`HERE_SITE` through a .pth file; returns its python.

    ``process_pth`` False adds the directory as a bare path, so the .pth files there (SyncLab's own editable
    install among them) stay unprocessed: what a wheel test needs. True adds it with ``site.addsitedir``, so an
    editable SyncLab there is importable too: what a plugin test needs.
    """
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(root)], check=True,
                   timeout=120)
    py = root / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    line = f"import site; site.addsitedir({HERE_SITE!r})" if process_pth else HERE_SITE
    (purelib / "synclab-deps.pth").write_text(line + "\n")
    return py
