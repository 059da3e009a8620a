"""scripts/sweep_spread.py: several processes' `bench --sweep --json` outputs against one
prediction, each and against their median."""
import importlib.util
import json
import pathlib

import pytest

_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "sweep_spread.py"
_spec = importlib.util.spec_from_file_location("sweep_spread", _SCRIPT)
sweep_spread = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep_spread)

GIB = 2**30


def write(tmp_path, name, rows, note="progress line\n"):
    p = tmp_path / name
    p.write_text(note + json.dumps({"sweep": rows}) + "\n")
    return str(p)


def row(weights_gib, predicted, measured):
    return {"weight_budget": int(weights_gib * GIB), "predicted_s": predicted,
            "measured_s": measured}


def test_errors_spread_and_median(tmp_path, capsys):
    a = write(tmp_path, "a.json", [row(1, 2.0, 2.0), row(2, 1.0, 1.02)])
    # Shares a few MiB apart (a list of budgets) still match; a share in one file only is dropped.
    b = write(tmp_path, "b.json", [row(1.001, 2.0, 1.96), row(2, 1.0, 0.99), row(3, 0.5, 0.5)])
    c = write(tmp_path, "c.json", [row(1, 2.0, 2.1), row(2, 1.0, 1.0)])
    assert sweep_spread.main([a, b, c, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    budgets = out["budgets"]
    assert len(budgets) == 2
    first = budgets[0]
    assert first["measured_s"] == [2.0, 1.96, 2.1]
    assert first["median_s"] == 2.0
    assert first["errors"] == pytest.approx([0.0, 0.04 / 1.96, -0.1 / 2.1])
    assert first["spread"] == pytest.approx((2.1 - 1.96) / 1.96)
    assert first["errors_vs_median"] == pytest.approx([0.0, 0.0, 0.0])
    # Budget 2: errors -1.96%, +1.01%, 0; its median 1.0, so the prediction is exact against it.
    assert out["within_1pct"] == [1, 0, 1]
    assert out["within_1pct_of_median"] == 2
    assert sweep_spread.main([a, b, c]) == 0
    text = capsys.readouterr().out
    assert "2 of 2 against the median of the 3" in text


def test_refuses_what_is_not_a_sweep(tmp_path, capsys):
    good = write(tmp_path, "good.json", [row(1, 2.0, 2.0)])
    plain = tmp_path / "bench.json"
    plain.write_text(json.dumps({"stages": {}}) + "\n")
    assert sweep_spread.main([good, str(plain)]) == 2
    assert "no sweep rows" in capsys.readouterr().err
    bad = write(tmp_path, "bad.json", [row(1, 2.0, 0.0)])
    assert sweep_spread.main([good, bad]) == 2
    assert "measured 0" in capsys.readouterr().err
    apart = write(tmp_path, "apart.json", [row(5, 2.0, 2.0)])
    assert sweep_spread.main([good, apart]) == 2
    assert "no budget is in every file" in capsys.readouterr().err
    assert sweep_spread.main([str(tmp_path / "missing.json")]) == 2
