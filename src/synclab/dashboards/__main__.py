"""``python -m synclab.dashboards DIR [--check]``: write (or check) the generated dashboards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from synclab.dashboards import stale, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synclab.dashboards", description=__doc__)
    parser.add_argument("directory", type=Path, help="where the dashboard JSON files go (grafana/dashboards)")
    parser.add_argument("--check", action="store_true", help="only report stale files; exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        names = stale(args.directory)
        for name in names:
            print(f"stale: {args.directory / name} (regenerate: python -m synclab.dashboards {args.directory})",
                  file=sys.stderr)
        return 1 if names else 0
    for path in write(args.directory):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
