#!/usr/bin/env python3
"""The page cache of a checkpoint's weights files, for cold-start measurements.

  python3 scripts/page_cache.py report DIR   the bytes of DIR's *.safetensors in the page cache
  python3 scripts/page_cache.py evict DIR    write back, then drop those files' cached pages
                                             (posix_fadvise DONTNEED: only these files' clean
                                             pages; nothing machine-wide is changed), and report

The report uses mincore(2) over a read-only mapping of each file (Linux only).
"""
import ctypes
import ctypes.util
import glob
import mmap
import os
import sys

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
PAGE = os.sysconf("SC_PAGE_SIZE")


def cached_bytes(path):
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = ctypes.create_string_buffer(pages)
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            resident = sum(b & 1 for b in vec.raw)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return min(size, resident * PAGE), size


def files(folder):
    found = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not found:
        sys.exit(f"page_cache: no .safetensors files in {folder}")
    return found


def report(folder):
    cached = total = 0
    for f in files(folder):
        c, s = cached_bytes(f)
        cached += c
        total += s
    print(f"page cache: {cached / 1e9:.2f} of {total / 1e9:.2f} GB of {folder} cached "
          f"({100 * cached / max(total, 1):.1f}%)")


def evict(folder):
    for f in files(folder):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    report(folder)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("report", "evict"):
        sys.exit(__doc__)
    {"report": report, "evict": evict}[sys.argv[1]](sys.argv[2])
