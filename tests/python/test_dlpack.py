"""DLPack export of checkpoint tensors (ferry.Checkpoint / Model.tensor): numpy adopts the
mapped bytes without a copy and read-only, through versioned capsules and legacy ones; the
capsule's structs read here with ctypes as the spec lays them out; the mapping lives as long as
any export; and 200 consumed plus 200 unconsumed capsules leave the process as it was.
"""
import ctypes
import gc

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

try:
    import ferry
    from ferry import _ferry
except ImportError as e:
    pytest.fail(f"cannot import ferry ({e}); install it with `pip install .`", pytrace=False)


# --- the DLPack 1.x structs, as the spec defines them, for reading capsules -----------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]

READ_ONLY, IS_COPIED = 1, 2


def managed(capsule, versioned=True):
    name = b"dltensor_versioned" if versioned else b"dltensor"
    assert _get_name(capsule) == name
    struct = DLManagedTensorVersioned if versioned else DLManagedTensor
    return struct.from_address(_get_pointer(capsule, name))


TENSORS = {
    "f32": np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.25 - 1,
    "f16": np.linspace(-3, 3, 10, dtype=np.float16),
    "i64": np.array([[1, -2], [3, 1 << 40]], dtype=np.int64),
    "u8": np.arange(7, dtype=np.uint8),
    "bf16": np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16),
    "big": np.random.default_rng(1).standard_normal((512, 512)).astype(np.float32),  # 1 MiB
    "scalar": np.array(2.5, dtype=np.float64),
    "empty": np.zeros((0, 4), dtype=np.float32),
}


@pytest.fixture(scope="module")
def file(tmp_path_factory):
    path = tmp_path_factory.mktemp("dlpack") / "t.safetensors"
    save_file(TENSORS, str(path))
    return path


@pytest.fixture
def ckpt(file):
    return ferry.Checkpoint(str(file))


class Legacy:
    """A producer seen by a consumer that does not know max_version: the legacy capsule."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None, **_):
        return self.tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_numpy_adopts_the_mapped_bytes_read_only(file, ckpt):
    want = load_file(str(file))
    assert sorted(ckpt.names()) == sorted(TENSORS)
    for name in ["f32", "f16", "i64", "u8", "big", "scalar", "empty"]:
        t = ckpt.tensor(name)
        a = np.from_dlpack(t)
        assert a.dtype == want[name].dtype and a.shape == want[name].shape, name
        assert a.tobytes() == want[name].tobytes(), name
        assert not a.flags.writeable, name
        if a.size:
            assert a.ctypes.data == t.data_ptr, name  # no copy: the mapping's address
    a = np.from_dlpack(ckpt.tensor("f32"))
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0, 0] = 7


def test_versioned_capsule_layout(ckpt):
    t = ckpt.tensor("bf16")  # numpy cannot take bf16; the capsule says what it is
    assert t.dtype == "BF16" and t.shape == (3,) and t.__dlpack_device__() == (1, 0)
    cap = t.__dlpack__(max_version=(1, 2))
    m = managed(cap)
    assert (m.major, m.minor) == (1, 1)
    assert m.flags == READ_ONLY
    d = m.dl_tensor
    assert (d.device.device_type, d.device.device_id) == (1, 0)
    assert (d.dtype.code, d.dtype.bits, d.dtype.lanes) == (4, 16, 1)  # kDLBfloat
    assert d.ndim == 1 and d.shape[0] == 3 and d.strides[0] == 1 and d.byte_offset == 0
    assert d.data == t.data_ptr
    assert ctypes.string_at(d.data, 6) == TENSORS["bf16"].tobytes()
    cap32 = ckpt.tensor("f32").__dlpack__(max_version=(1, 0))  # kept: its struct dies with it
    f = managed(cap32)
    assert (f.major, f.minor) == (1, 0)
    assert [f.dl_tensor.strides[i] for i in range(3)] == [12, 4, 1]
    assert (f.dl_tensor.dtype.code, f.dl_tensor.dtype.bits) == (2, 32)


def test_legacy_capsule(file, ckpt):
    t = ckpt.tensor("big")
    cap = t.__dlpack__()
    m = managed(cap, versioned=False)
    assert m.dl_tensor.data == t.data_ptr and m.dl_tensor.dtype.code == 2
    a = np.from_dlpack(Legacy(t))
    assert a.ctypes.data == t.data_ptr
    assert not a.flags.writeable  # numpy's choice for legacy capsules, which cannot say
    assert a.tobytes() == load_file(str(file))["big"].tobytes()


def test_copy_and_device_requests(ckpt):
    t = ckpt.tensor("f32")
    c = np.from_dlpack(t, copy=True)
    assert c.flags.writeable and c.ctypes.data != t.data_ptr
    assert (c == TENSORS["f32"]).all()
    c[0, 0, 0] = 7  # its own bytes
    assert np.from_dlpack(t)[0, 0, 0] == -1
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    assert managed(cap).flags == IS_COPIED
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(KeyError):
        ckpt.tensor("nope")


def test_the_mapping_lives_as_long_as_an_export(file):
    c = ferry.Checkpoint(str(file))
    base = _ferry._live_exports()
    a = np.from_dlpack(c.tensor("big"))
    cap = c.tensor("f32").__dlpack__(max_version=(1, 0))
    del c
    gc.collect()
    assert _ferry._live_exports() == base + 2
    assert a.tobytes() == TENSORS["big"].tobytes()  # still mapped
    del a, cap
    gc.collect()
    assert _ferry._live_exports() == base


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def cycles(ckpt, n):
    t = ckpt.tensor("big")
    for _ in range(n):  # consumed: numpy calls the deleter when the array goes
        a = np.from_dlpack(t)
        assert a[511, 511] == TENSORS["big"][511, 511]
        del a
        a = np.from_dlpack(Legacy(t))
        del a
        a = np.from_dlpack(t, copy=True)  # a leak here would be 1 MiB a cycle
        del a
    for _ in range(n):  # unconsumed: the capsule's destructor frees the tensor
        cap = t.__dlpack__(max_version=(1, 0))
        del cap
        cap = t.__dlpack__()
        del cap
        cap = t.__dlpack__(max_version=(1, 0), copy=True)
        del cap


def test_200_consumed_and_200_unconsumed_capsules_leave_the_footprint_flat(ckpt):
    base = _ferry._live_exports()
    cycles(ckpt, 20)  # warm-up: allocator pools, the mapping's pages
    gc.collect()
    before = rss_bytes()
    cycles(ckpt, 200)
    gc.collect()
    after = rss_bytes()
    assert _ferry._live_exports() == base
    # 600 exports of a 1 MiB tensor, 200 of them copies: a leak of one copy alone is 200 MiB.
    assert after - before < 4 << 20, (before, after)
    cycles(ckpt, 200)
    gc.collect()
    assert rss_bytes() - after < 4 << 20  # and no growth from one round to the next


def test_torch_adopts_the_mapped_bytes(file, ckpt):
    """Where torch is installed (not in CI): torch.from_dlpack takes the mapped bytes, BF16
    included, at the mapping's address."""
    torch = pytest.importorskip("torch")
    want = load_file(str(file))
    for name in ["f32", "f16", "i64", "u8", "bf16", "big"]:
        t = ckpt.tensor(name)
        x = torch.from_dlpack(t)
        assert tuple(x.shape) == want[name].shape, name
        assert x.contiguous().view(torch.uint8).numpy().tobytes() == want[name].tobytes(), name
        assert x.data_ptr() == t.data_ptr, name
