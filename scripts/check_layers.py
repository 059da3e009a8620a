#!/usr/bin/env python3
"""Lists every include in src/ that reaches a higher layer than its own file's.

The layers are src/layers.txt's, lowest first; a file of src/LAYER/ may include headers of LAYER
and of the layers listed before it. Prints one line per offending include
(`src/model/x.h:12: model includes exec/executor.h`) and exits 1; prints nothing and exits 0 when
the tree keeps its layers. The build refuses such an include too (each layer's library sees only
the folders below it); this check needs no compiler and names every offence at once.

Usage: scripts/check_layers.py [ROOT]   (ROOT: the repository, default: this script's parent's)
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"/]+)/[^"]*"')
SOURCES = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"}


def read_layers(root):
    layers = []
    for line in (root / "src" / "layers.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            layers.append(line)
    return layers


def upward_includes(root):
    layers = read_layers(root)
    rank = {name: i for i, name in enumerate(layers)}
    found = []
    for path in sorted((root / "src").rglob("*")):
        if path.suffix not in SOURCES or not path.is_file():
            continue
        own = path.relative_to(root / "src").parts[0]
        if own not in rank:
            found.append(f"{path.relative_to(root)}: folder src/{own} is not in src/layers.txt")
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in rank:
                continue
            target = m.group(1)
            if rank[target] > rank[own]:
                header = line.split('"')[1]
                found.append(f"{path.relative_to(root)}:{number}: {own} includes {header}")
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    found = upward_includes(root.resolve())
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
