"""Whether a build's report is the one recorded before a change: its config, counts and metrics, key for
key and value for value (timings and steps differ from run to run, and are not compared).

    textflix report --json --data-dir DIR > after.json
    python scripts/same_report.py docs/benchmarks/records/steam-default-9cd7ee4.json after.json

One line per difference, then one line per part; exit status 1 when any differs. A refactoring that
should change nothing (issue 54) is checked this way on a default build.
"""

import argparse
import json
import sys
from pathlib import Path

PARTS = ("config", "counts", "metrics")


def differences(before, after, at: str) -> list[str]:
    """Where ``after`` differs from ``before``: keys only one has, values not equal (floats exactly)."""
    if isinstance(before, dict) and isinstance(after, dict):
        found = [f"{at}.{key}: only before, {before[key]!r}" for key in before if key not in after]
        found += [f"{at}.{key}: only after, {after[key]!r}" for key in after if key not in before]
        return found + [line for key in before if key in after for line in differences(before[key], after[key], f"{at}.{key}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [line for i, (a, b) in enumerate(zip(before, after)) for line in differences(a, b, f"{at}[{i}]")]
    return [] if before == after else [f"{at}: {before!r} became {after!r}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="the recorded report (textflix report --json)")
    parser.add_argument("after", type=Path, help="the report of the build made after the change")
    args = parser.parse_args()
    before, after = (json.loads(path.read_text()) for path in (args.before, args.after))
    total = 0
    for part in PARTS:
        found = differences(before.get(part), after.get(part), part)
        print("\n".join(found[:50]) + ("\n" if found else ""), end="")
        print(f"{part}: {len(found)} differences")
        total += len(found)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
