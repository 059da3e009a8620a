"""scripts/check_layers.py: the tree keeps its layers, and a planted upward include is named."""
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def run(root):
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


def test_the_tree_includes_no_higher_layer():
    r = run(ROOT)
    assert r.stdout == "" and r.returncode == 0, r.stdout


def tiny_tree(tmp_path):
    (tmp_path / "src" / "core").mkdir(parents=True)
    (tmp_path / "src" / "model").mkdir()
    (tmp_path / "src" / "layers.txt").write_text("# lowest first\ncore\nmodel\n")
    (tmp_path / "src" / "core" / "a.h").write_text('#include <vector>\n#include "core/b.h"\n')
    (tmp_path / "src" / "model" / "m.cpp").write_text('#include "core/a.h"\n#include "model/m.h"\n')
    return tmp_path


def test_a_clean_tree_prints_nothing(tmp_path):
    r = run(tiny_tree(tmp_path))
    assert (r.returncode, r.stdout) == (0, "")


def test_an_upward_include_is_named_with_its_line(tmp_path):
    root = tiny_tree(tmp_path)
    (root / "src" / "core" / "a.h").write_text('#include <vector>\n  #  include "model/m.h"\n')
    r = run(root)
    assert r.returncode == 1
    assert r.stdout.splitlines() == ["src/core/a.h:2: core includes model/m.h"]


def test_a_folder_outside_the_layers_is_named(tmp_path):
    root = tiny_tree(tmp_path)
    (root / "src" / "extra").mkdir()
    (root / "src" / "extra" / "x.cpp").write_text("int x;\n")
    r = run(root)
    assert r.returncode == 1
    assert "src/extra is not in src/layers.txt" in r.stdout
