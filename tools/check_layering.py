#!/usr/bin/python3
"""Checks that each stage includes only the stages before it.

The README's architecture table, as rules: for each folder, the project
folders its files may include (`#include "<folder>/..."`). A file of a
folder not listed, or an include of a project folder not allowed, is an
error naming the file and line. Also refuses a .cpp file directly in
compiler/ (every file there belongs to a stage).

  /usr/bin/python3 tools/check_layering.py [repository root]
"""

import os
import re
import sys

# Folder -> project folders it may include (itself always).
ALLOWED = {
    "dialect": [],
    "passes": ["dialect"],
    "compiler/cuda": [],
    "compiler/import": ["dialect", "passes", "runtime"],
    "compiler/codegen": ["dialect", "passes", "compiler/cuda", "runtime"],
    "compiler/options": ["dialect", "passes", "compiler/codegen"],
    "compiler/report": ["dialect", "passes", "compiler/codegen",
                        "compiler/cuda", "compiler/options", "runtime"],
    "compiler/driver": ["dialect", "passes", "compiler/cuda",
                        "compiler/import", "compiler/codegen",
                        "compiler/options", "compiler/report", "runtime"],
    "runtime": [],
}
PROJECT = ["dialect", "passes", "compiler", "runtime"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def stage_of(path):
    """The longest ALLOWED key that `path` lies under."""
    best = None
    for stage in ALLOWED:
        if path == stage or path.startswith(stage + "/"):
            if best is None or len(stage) > len(best):
                best = stage
    return best


def included_stage(include):
    if include.split("/")[0] not in PROJECT:
        return None  # MLIR, LLVM, generated .inc files, system headers
    return stage_of(include) or include.split("/")[0]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
    errors = []
    for top in PROJECT:
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".inc")):
                    continue
                path = os.path.relpath(os.path.join(directory, name), root)
                if top == "compiler" and os.path.dirname(path) == "compiler":
                    errors.append(f"{path}: a file directly in compiler/; "
                                  "put it in the folder of its stage")
                    continue
                stage = stage_of(path)
                if stage is None:
                    errors.append(f"{path}: in no stage of the architecture "
                                  "table (tools/check_layering.py ALLOWED)")
                    continue
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = included_stage(m.group(1))
                        if target is None or target == stage:
                            continue
                        if target not in ALLOWED[stage]:
                            errors.append(
                                f"{path}:{number}: {stage} includes "
                                f"{m.group(1)} ({target}), which is not "
                                f"before it")
    for error in errors:
        print(f"check_layering: error: {error}", file=sys.stderr)
    if errors:
        return 1
    print("check_layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
