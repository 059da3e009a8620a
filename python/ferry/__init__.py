"""ferry: run models larger than GPU memory on a VRAM budget, bit-exact.

    import ferry
    model = ferry.Model("alpamayo-r1-10b/", vram="8GiB")
    out = model.drive(frames="inputs/frames", ego_history="inputs/history.json")
    print(out.text, out.waypoints.shape, out.timings["total"])

A Model opens its checkpoint once and keeps the session (device buffers, resident weights,
recorded graphs) between runs that fit it (docs/python.md). Inputs and outputs are numpy; the
GIL is released while ferry reads inputs and runs the model. Errors are ValueError (bad input),
OSError (files), or ferry.Error, each with ferry's one-line message.

Checkpoint tensors export through DLPack without a copy, read-only:
numpy.from_dlpack(model.tensor("lm_head.weight")).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _ferry
from ._ferry import Checkpoint, Error, Tensor

__all__ = ["Model", "Checkpoint", "Tensor", "Error", "Generation", "Drive", "cuda", "synth"]

cuda: bool = _ferry.cuda


def synth(preset: str, out: "PathLike", *, seed: int = 0, force: bool = False) -> None:
    """`ferry synth`: a preset's checkpoint (alpamayo-tiny, qwen3-tiny, ...) with seeded random
    weights and a synthetic tokenizer.json, written into `out`."""
    _ferry.synth(preset, os.fspath(out), int(seed), bool(force))

PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class Generation:
    """One generate() run: the text (special tokens included), the token ids, why it stopped
    ("end_of_turn", "max_tokens"), the prompt length and the time per stage in seconds."""

    text: str
    tokens: list
    stop: str
    prompt_tokens: int
    timings: dict
    logits_hash: str = ""
    prefill_logits_hash: str = ""
    opened_session: bool = False


@dataclass
class Drive(Generation):
    """One drive() run: Generation's fields, the reasoning (the text before <|cot_end|>), and
    the trajectory: 64 waypoints (x, y, z in metres, t0 ego frame) at the model's dt, their
    yaws, and the expert's normalized actions (acceleration, curvature)."""

    reasoning: str = ""
    waypoints: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.float32))
    yaw: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.float32))
    actions: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.float32))
    actions_hash: str = ""


def _size(vram: Union[None, str, int]) -> Optional[str]:
    if vram is None:
        return None
    if isinstance(vram, bool) or not isinstance(vram, (int, str)):
        raise TypeError(f"vram: expected a size such as '8GiB', a byte count or 'auto', got {vram!r}")
    if isinstance(vram, int):
        if vram <= 0:
            raise ValueError(f"vram: expected a positive byte count, got {vram}")
        return str(vram)
    return vram


def _frames(frames: Any) -> tuple:
    """(folder or manifest path, list of paths / uint8 arrays) from what the caller gave."""
    if frames is None:
        return None, []
    if isinstance(frames, (str, os.PathLike)):
        return os.fspath(frames), []
    if isinstance(frames, np.ndarray):
        if frames.ndim != 4:
            raise ValueError("frames: an array of frames must be NxHxWx3 uint8")
        frames = list(frames)
    out = []
    for i, f in enumerate(frames):
        if isinstance(f, (str, os.PathLike)):
            out.append(os.fspath(f))
            continue
        a = np.asarray(f)
        if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3:
            raise ValueError(f"frames[{i}]: expected an HxWx3 uint8 RGB array, got "
                             f"{a.dtype} of shape {a.shape}")
        out.append(np.ascontiguousarray(a))
    return None, out


def _floats(name: str, value: Any, shape: tuple) -> list:
    a = np.asarray(value, dtype=np.float64)
    if a.shape[-len(shape):] != shape or a.size != int(np.prod(shape)):
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    return a.reshape(-1).tolist()


def _history(ego_history: Any, yaw: Any, rotations: Any) -> Optional[dict]:
    if ego_history is None:
        if yaw is not None or rotations is not None:
            raise ValueError("yaw and rotations go with ego_history")
        return None
    if isinstance(ego_history, (str, os.PathLike)):
        if yaw is not None:
            raise ValueError("yaw goes with an ego_history array; a file holds its own")
        h = {"path": os.fspath(ego_history)}
        if rotations is not None:
            if not isinstance(rotations, (str, os.PathLike)):
                raise ValueError("rotations: with an ego_history file, give a file too")
            h["rotations_path"] = os.fspath(rotations)
        return h
    h = {"xyz": _floats("ego_history", ego_history, (16, 3))}
    if yaw is not None and rotations is not None:
        raise ValueError("give yaw or rotations, not both")
    if yaw is not None:
        h["yaw"] = _floats("yaw", yaw, (16,))
    if rotations is not None:
        h["rot"] = _floats("rotations", rotations, (16, 3, 3))
    return h


def _max_tokens(max_tokens: Optional[int]) -> int:
    if max_tokens is None:
        return 0
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens: expected a positive integer, got {max_tokens!r}")
    return max_tokens


class Model:
    """A checkpoint folder loaded for many runs.

    vram: a budget for every device byte ferry takes ("8GiB", "2500MB", a byte count, or
    "auto"); weights that do not fit are streamed. backend: "cpu" or "cuda" (default: CUDA when
    available). mode, slots, resident, resident_count, plan, profile, host_path: as the flags
    of `ferry run`. graphs: record replayable calls once and replay them.
    """

    def __init__(self, path: PathLike, vram: Union[None, str, int] = None, *,
                 backend: Optional[str] = None, mode: Optional[str] = None,
                 slots: Optional[int] = None, resident: Union[None, str, Sequence] = None,
                 resident_count: Optional[int] = None, plan: Optional[PathLike] = None,
                 profile: Optional[PathLike] = None, host_path: str = "auto",
                 graphs: bool = True):
        if backend == "auto":
            backend = None
        if resident is not None and not isinstance(resident, str):
            resident = ",".join(str(r) for r in resident) or "none"
        self._m = _ferry.Model(
            os.fspath(path), backend=backend, vram=_size(vram), mode=mode, slots=slots,
            resident=resident, resident_count=resident_count,
            plan=None if plan is None else os.fspath(plan),
            profile=None if profile is None else os.fspath(profile),
            host_path=host_path, graphs=graphs)

    @property
    def config(self) -> dict:
        """The architecture and its sizes, the weights' bytes and groups."""
        return self._m._config

    @property
    def plan(self) -> Optional[dict]:
        """The session's plan and device memory, as `ferry run --json` prints them (None before
        the first run)."""
        return self._m.plan

    @property
    def memory(self) -> Optional[str]:
        return self._m.memory

    @property
    def backend(self) -> str:
        return self._m.backend

    @property
    def sessions_opened(self) -> int:
        """Sessions opened so far: one, unless a run did not fit the one before."""
        return self._m.sessions_opened

    @property
    def checkpoint(self) -> Checkpoint:
        return self._m.checkpoint

    def tensor(self, name: str) -> Tensor:
        """A checkpoint tensor, for numpy.from_dlpack / torch.from_dlpack (no copy, read-only)."""
        return self._m.tensor(name)

    def generate(self, prompt: str, *, system: Optional[str] = None, thinking: bool = True,
                 frames: Any = None, max_tokens: Optional[int] = None,
                 greedy: Optional[bool] = None, temperature: Optional[float] = None,
                 top_p: Optional[float] = None, seed: int = 0) -> Generation:
        """Text models (Qwen3, Qwen3-VL with optional frames): the chat template around
        `prompt`, generation until the end of the turn or max_tokens (default 512). Greedy unless
        temperature or top_p is given."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompt: expected str, got {type(prompt).__name__}")
        if system is not None and not isinstance(system, str):
            raise TypeError(f"system: expected str, got {type(system).__name__}")
        path, listed = _frames(frames)
        chat = {"user": prompt, "system": system, "thinking": bool(thinking)}
        d = self._m._run(path, listed, None, chat, _max_tokens(max_tokens), greedy,
                         temperature, top_p, int(seed), None)
        return Generation(**{k: d[k] for k in Generation.__dataclass_fields__})

    def drive(self, frames: Any, ego_history: Any, *, yaw: Any = None, rotations: Any = None,
              max_tokens: Optional[int] = None, greedy: Optional[bool] = None,
              temperature: Optional[float] = None, top_p: Optional[float] = None,
              seed: int = 0, steps: Optional[int] = None) -> Drive:
        """Alpamayo-R1: 16 frames (a folder or frames.json manifest, or a list of image paths or
        HxWx3 uint8 arrays, 4 cameras x 4 times, camera-major) and the 16 past positions (an
        array (16, 3) in the t0 ego frame, or a .json / .npy file) give the reasoning and the
        trajectory. Samples as the reference does (temperature 0.6, top-p 0.98) unless greedy."""
        path, listed = _frames(frames)
        history = _history(ego_history, yaw, rotations)
        d = self._m._run(path, listed, history, None, _max_tokens(max_tokens), greedy,
                         temperature, top_p, int(seed), steps)
        return Drive(**{k: d[k] for k in Drive.__dataclass_fields__})

    def __repr__(self) -> str:
        return f"ferry.Model({self._m.path!r}, {self._m.architecture}, backend={self.backend})"
