"""Makes the ferry_ops extension importable for the op tests.

The module is looked up in $FERRY_BUILD_DIR/python (default: build/python under the repository
root). If it is missing the tests fail with a message saying how to build it; nothing is skipped.
"""
import importlib
import os
import pathlib
import sys

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_BUILD = pathlib.Path(os.environ.get("FERRY_BUILD_DIR", "build"))
if not _BUILD.is_absolute():
    _BUILD = _ROOT / _BUILD
_MODULE_DIR = _BUILD / "python"
sys.path.insert(0, str(_MODULE_DIR))


@pytest.fixture(scope="session")
def ferry_ops():
    try:
        return importlib.import_module("ferry_ops")
    except ImportError as e:
        pytest.fail(
            f"cannot import ferry_ops from {_MODULE_DIR} ({e}); build it with "
            f"`ninja -C {_BUILD} ferry_ops` (needs pybind11) or set FERRY_BUILD_DIR",
            pytrace=False,
        )


@pytest.fixture
def ops(ferry_ops):
    """The module with a default backend (all cores, no injected delays)."""
    ferry_ops.configure(threads=0)
    return ferry_ops
