"""The `ferry` Python package (pip install .): Model.drive and Model.generate against
`ferry run --json` on the same inputs (bit-identical tokens, hashes and trajectory), sessions
kept between runs that fit, bad inputs as exceptions, and the GIL released while the model runs.

The package must be installed (scripts/test.sh runs `pip install .` first); the CLI comes from
$FERRY_BUILD_DIR as in the other tests.
"""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("FERRY_BUILD_DIR", "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
FERRY = os.environ.get("FERRY_BINARY", str(BUILD / "ferry"))

try:
    import ferry
except ImportError as e:  # not skipped: the package is part of what CI checks
    pytest.fail(f"cannot import ferry ({e}); install it with `pip install .`", pytrace=False)


def synth(preset, out):
    r = subprocess.run([FERRY, "synth", "--preset", preset, "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def cli_run(model, *args):
    r = subprocess.run([FERRY, "run", "--model", str(model), "--backend", "cpu", "--quiet",
                        "--json", *map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def history_xyz():
    return np.array([[0.8 * (k - 15), 0.002 * (k - 15) ** 2, 0.0] for k in range(16)])


@pytest.fixture(scope="module")
def alpamayo(tmp_path_factory):
    root = tmp_path_factory.mktemp("alpamayo")
    synth("alpamayo-tiny", root / "model")
    frames = root / "frames"
    frames.mkdir()
    rng = np.random.default_rng(5)
    for i in range(16):
        px = rng.integers(0, 256, (180, 320, 3), dtype=np.uint8)
        Image.fromarray(px).save(frames / f"{i:02d}.png")
    (root / "history.json").write_text(json.dumps({"xyz": history_xyz().tolist()}))
    return root


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    return synth("qwen3-tiny", tmp_path_factory.mktemp("qwen3") / "model")


@pytest.fixture(scope="module")
def car(alpamayo):
    return ferry.Model(alpamayo / "model", backend="cpu")


def same_as_cli(out, j):
    assert out.tokens == j["tokens"]
    assert out.text == j["text"]
    assert out.stop == j["stop"]
    assert out.prompt_tokens == j["prompt_tokens"]
    assert out.logits_hash == j["logits_hash"]
    assert out.prefill_logits_hash == j["prefill_logits_hash"]


ALONE = """
import sys, numpy as np, ferry
ferry.synth("alpamayo-tiny", sys.argv[1] + "/m")
rng = np.random.default_rng(0)
frames = [rng.integers(0, 256, (180, 320, 3), dtype=np.uint8) for _ in range(16)]
history = np.stack([np.arange(-15, 1) * 0.8, np.zeros(16), np.zeros(16)], axis=1)
out = ferry.Model(sys.argv[1] + "/m", backend="cpu").drive(frames, history, max_tokens=4)
assert out.waypoints.shape == (64, 3) and np.isfinite(out.waypoints).all()
print(ferry.__file__, len(out.tokens), out.timings["total"] > 0)
"""


def test_a_whole_inference_from_python_alone(tmp_path):
    # In another folder, no CLI: what a user of the installed package runs.
    r = subprocess.run([sys.executable, "-c", ALONE, str(tmp_path)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    path, tokens, timed = r.stdout.split()
    assert not Path(path).is_relative_to(ROOT)  # the installed package, not the checkout
    assert 1 <= int(tokens) <= 4 and timed == "True"
    with pytest.raises(ValueError, match="unknown preset"):
        ferry.synth("alpamayo-huge", tmp_path / "x")


def test_drive_matches_cli_and_keeps_its_session(alpamayo, car):
    j = cli_run(alpamayo / "model", "--frames", alpamayo / "frames", "--ego-history",
                alpamayo / "history.json", "--max-tokens", 5, "--seed", 3)
    out = car.drive(frames=alpamayo / "frames", ego_history=alpamayo / "history.json",
                    max_tokens=5, seed=3)
    same_as_cli(out, j)
    assert out.reasoning == j["reasoning"]
    assert out.actions_hash == j["actions_hash"]
    assert out.waypoints.shape == (64, 3) and out.waypoints.dtype == np.float32
    assert (out.waypoints == np.array(j["trajectory_xyz"], dtype=np.float32)).all()
    assert (out.yaw == np.array(j["trajectory_yaw"], dtype=np.float32)).all()
    assert (out.actions.reshape(-1) == np.array(j["actions"], dtype=np.float32)).all()
    assert set(out.timings) == {"open", "vision", "prefill", "decode", "expert", "total"}
    assert out.timings["total"] > 0 and out.timings["expert"] > 0
    assert out.opened_session
    opened = car.sessions_opened

    # The same inputs as numpy arrays: the same bytes out, on the session already open.
    arrays = [np.asarray(Image.open(p).convert("RGB"))
              for p in sorted((alpamayo / "frames").iterdir())]
    again = car.drive(frames=arrays, ego_history=history_xyz(), max_tokens=5, seed=3)
    assert not again.opened_session and car.sessions_opened == opened
    assert again.tokens == out.tokens and again.actions_hash == out.actions_hash
    assert (again.waypoints == out.waypoints).all()
    assert car.plan["mode"] in ("pipelined", "sequential") and car.plan["resident_bytes"] > 0
    assert " = " in car.memory


def test_drive_greedy_matches_cli(alpamayo, car):
    j = cli_run(alpamayo / "model", "--frames", alpamayo / "frames", "--ego-history",
                alpamayo / "history.json", "--max-tokens", 4, "--greedy", "--steps", 3)
    out = car.drive(frames=alpamayo / "frames", ego_history=alpamayo / "history.json",
                    max_tokens=4, greedy=True, steps=3)
    same_as_cli(out, j)
    assert out.actions_hash == j["actions_hash"]
    assert out.opened_session  # other settings: another session


def test_generate_matches_cli_for_prompts_of_several_lengths(qwen3):
    model = ferry.Model(qwen3, backend="cpu", vram="1GiB")
    assert model.plan is None and model.sessions_opened == 0
    prompts = ["Tell me about ferries on the Rhine, please, in some detail.",
               "Hi",  # shorter: the session already open holds it
               "A longer prompt than the first one, " * 4]  # longer: a new session
    opened = []
    for p in prompts:
        j = cli_run(qwen3, "--prompt", p, "--max-tokens", 6, "--vram", "1GiB")
        out = model.generate(p, max_tokens=6)
        same_as_cli(out, j)
        opened.append(out.opened_session)
        if out.opened_session:  # sized for this prompt, as the CLI's
            assert model.plan == j["plan"]
    assert opened == [True, False, True]
    assert model.sessions_opened == 2
    assert model.config["architecture"] == "qwen3"
    j = cli_run(qwen3, "--prompt", "Why?", "--system", "Be brief.", "--no-thinking",
                "--max-tokens", 6, "--temperature", 0.8, "--seed", 11)
    out = model.generate("Why?", system="Be brief.", thinking=False, max_tokens=6,
                         temperature=0.8, seed=11)
    same_as_cli(out, j)


def test_bad_inputs_raise_and_the_model_still_runs(alpamayo, car, qwen3):
    frames = alpamayo / "frames"
    hist = alpamayo / "history.json"
    files = sorted(frames.iterdir())
    with pytest.raises(ValueError, match="16 frames"):
        car.drive(frames=files[:15], ego_history=hist, max_tokens=2)
    with pytest.raises(ValueError, match="uint8"):
        car.drive(frames=[np.zeros((180, 320, 3), np.float32)] * 16, ego_history=hist)
    with pytest.raises(ValueError, match="one size"):
        car.drive(frames=[np.zeros((180, 320, 3), np.uint8)] * 15 +
                  [np.zeros((100, 320, 3), np.uint8)], ego_history=hist, max_tokens=2)
    with pytest.raises(ValueError, match="shape"):
        car.drive(frames=frames, ego_history=np.zeros((15, 3)))
    bad = history_xyz()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError):
        car.drive(frames=frames, ego_history=bad, max_tokens=2)
    with pytest.raises(OSError, match="nowhere"):
        car.drive(frames=frames, ego_history=alpamayo / "nowhere.json", max_tokens=2)
    with pytest.raises(ValueError, match="prompt"):
        car.generate("hello")
    with pytest.raises(ValueError, match="max_tokens"):
        car.drive(frames=frames, ego_history=hist, max_tokens=0)
    with pytest.raises(ValueError):
        car.drive(frames=frames, ego_history=hist, greedy=True, temperature=0.5)
    text = ferry.Model(qwen3, backend="cpu")
    with pytest.raises(ValueError, match="ego history"):
        text.drive(frames=None, ego_history=history_xyz())
    with pytest.raises(ValueError, match="text-only"):
        text.generate("hi", frames=files[:1])
    with pytest.raises(ValueError, match="vram"):
        ferry.Model(qwen3, vram="lots")
    with pytest.raises(ValueError, match="backend"):
        ferry.Model(qwen3, backend="tpu")
    with pytest.raises((OSError, ferry.Error)):
        ferry.Model(alpamayo / "no-model")
    out = car.drive(frames=frames, ego_history=hist, max_tokens=2, greedy=True)
    assert out.waypoints.shape == (64, 3)


def test_the_gil_is_released_while_the_model_runs(alpamayo, car):
    done = threading.Event()
    result = {}

    def work():
        t0 = time.perf_counter()
        result["out"] = car.drive(frames=alpamayo / "frames",
                                  ego_history=alpamayo / "history.json", max_tokens=6)
        result["seconds"] = time.perf_counter() - t0
        done.set()

    thread = threading.Thread(target=work)
    ticks = []
    thread.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    thread.join()
    gaps = np.diff(ticks)
    assert result["seconds"] > 0.2, "the run is too short to tell"
    # Held for the whole run, the GIL would stop this loop for about that long.
    assert gaps.max() < 0.5 * result["seconds"], (gaps.max(), result["seconds"])
    assert len(ticks) > 20


def test_runs_from_several_threads_take_turns(qwen3):
    model = ferry.Model(qwen3, backend="cpu")
    want = model.generate("Count to three.", max_tokens=5)
    got = [None] * 4
    plans = []

    def work(i):
        got[i] = model.generate("Count to three.", max_tokens=5)
        plans.append(model.plan)  # waits for a run on another thread, never reads half a session

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [g.tokens for g in got] == [want.tokens] * 4
    assert all(p == plans[0] for p in plans) and model.sessions_opened == 1
