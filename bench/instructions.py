"""Start-up cost in instructions: the same ctxwin command under two or more checkouts.

Wall-clock start-up on a shared machine moves by 10 % between runs, more than most
start-up changes; an instruction count does not. This runs each command once per
checkout under valgrind's cachegrind (no cache simulation) and prints the
instructions executed, so a change of a few hundred thousand instructions shows.

Usage::

    git archive OLD ctxwin | tar -x -C /tmp/old      # a checkout to compare with
    .venv/bin/python bench/instructions.py /tmp/old .

Each argument is a directory holding a ``ctxwin`` package; it goes first on
``PYTHONPATH`` and the command runs from an empty directory (``python -m`` would
otherwise import ``ctxwin`` from the current directory). ``PYTHONHASHSEED=0`` keeps
the counts repeatable. Needs ``valgrind``; a run takes a few seconds.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen  # noqa: E402  (bench/gen.py, next to this file)

COMMANDS = {
    "import ctxwin": ["-c", "import ctxwin"],
    "estimate --json": ["-m", "ctxwin", "estimate", "{small}", "--json"],
    "estimate --json --estimator bound": [
        *("-m", "ctxwin", "estimate", "{small}", "--json", "--estimator", "bound"),
    ],
    "estimate (summary)": ["-m", "ctxwin", "estimate", "{small}"],
    "prune": ["-m", "ctxwin", "prune", "{small}", "{out}", "--context-length", "4000"],
}


def instructions(python: str, root: Path, args: list[str], cwd: str) -> int:
    """Instructions executed by ``python ARGS`` with ``root`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": "0"}
    valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
    valgrind.append("--cachegrind-out-file=/dev/null")
    done = subprocess.run(
        [*valgrind, python, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="+", type=Path, help="directories holding a ctxwin package")
    ap.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    ap.add_argument(
        "--sizes",
        default="",
        help="also estimate and prune transcripts of these sizes (e.g. 10k,100k; slow)",
    )
    args = ap.parse_args(argv)
    roots = [r.resolve() for r in args.roots]
    for r in roots:
        if not (r / "ctxwin" / "__init__.py").is_file():
            ap.error(f"{r} holds no ctxwin package")
        subprocess.run([args.python, "-m", "compileall", "-q", str(r / "ctxwin")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small.json"
        gen.write(small, 10, 1)
        names = [str(r) for r in roots]
        print("| command | " + " | ".join(names) + " | last ÷ first |")
        print("|---|" + "---:|" * len(names) + "---:|")
        commands = dict(COMMANDS)
        for size in [gen.parse_count(p) for p in args.sizes.split(",") if p.strip()]:
            big = Path(tmp) / f"t{size}.json"
            gen.write(big, size, 1)
            commands[f"estimate --json, {size:,} messages"] = ["-m", "ctxwin", "estimate"]
            commands[f"estimate --json, {size:,} messages"] += [str(big), "--json"]
            commands[f"prune, {size:,} messages"] = ["-m", "ctxwin", "prune", str(big), "{out}"]
        for name, template in commands.items():
            cmd = [a.format(small=small, out=Path(tmp) / "out.json") for a in template]
            counts = [instructions(args.python, r, cmd, tmp) for r in roots]
            cells = " | ".join(f"{c / 1e6:,.1f} M" for c in counts)
            print(f"| {name} | {cells} | {counts[-1] / counts[0]:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
