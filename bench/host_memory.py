#!/usr/bin/env python3
"""Host memory of 1, 2, 4 ... concurrent ferry processes serving one checkpoint (issue 11 d.4).

Each process runs `ferry bench` on the same model folder (weights live in the page cache as clean
file pages, mapped read-only and shared; nothing should copy them into anonymous memory). While
they run, every process's /proc/PID/status is sampled (RssAnon, RssFile, RssShmem) along with the
machine's /proc/meminfo (MemTotal - MemAvailable, Cached), and the peak of each is kept. The
machine's used memory is reported relative to the moment before the processes start, so the
checkpoint's pages already in the page cache are not counted as growth.

    bench/host_memory.py --ferry build/ferry --model DIR [--counts 1,2,4] [--json OUT]
                         [-- extra bench flags, e.g. --vram 15GiB --runs 3]

Prints one row per count and, with --json, writes the rows. Exit status 1 when a process failed.
"""
import argparse
import json
import subprocess
import sys
import threading
import time


def status_kib(pid):
    """RssAnon, RssFile, RssShmem of a process in KiB (None once it has exited)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile", "RssShmem"):
                    out[key] = int(value.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return out


def meminfo_kib():
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            info[key] = int(value.split()[0])
    return {"used": info["MemTotal"] - info["MemAvailable"], "cached": info.get("Cached", 0)}


def measure(ferry, model, count, extra, interval):
    before = meminfo_kib()
    procs = [subprocess.Popen([ferry, "bench", "--model", model, "--quiet", "--json", *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(count)]
    peaks = [dict(RssAnon=0, RssFile=0, RssShmem=0) for _ in procs]
    machine_peak = dict(before)
    done = threading.Event()

    def sample():
        while not done.is_set():
            for i, p in enumerate(procs):
                s = status_kib(p.pid)
                if s:
                    for k, v in s.items():
                        peaks[i][k] = max(peaks[i][k], v)
            m = meminfo_kib()
            for k, v in m.items():
                machine_peak[k] = max(machine_peak[k], v)
            time.sleep(interval)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    outputs = [p.communicate() for p in procs]
    done.set()
    t.join()
    failed = [(p.returncode, err.strip().splitlines()[-1:] or [""])
              for p, (_, err) in zip(procs, outputs) if p.returncode != 0]
    medians = []
    for out, _ in outputs:
        try:
            medians.append(json.loads(out.strip().splitlines()[-1])["stages"]["total"]["median_s"])
        except (ValueError, IndexError, KeyError):
            medians.append(None)
    gib = 1 / (1024 * 1024)
    return {
        "processes": count,
        "rss_anon_gib_max": max(p["RssAnon"] for p in peaks) * gib,
        "rss_file_gib_max": max(p["RssFile"] for p in peaks) * gib,
        "rss_shmem_gib_max": max(p["RssShmem"] for p in peaks) * gib,
        "machine_used_growth_gib": (machine_peak["used"] - before["used"]) * gib,
        "page_cache_gib_before": before["cached"] * gib,
        "bench_median_s": medians,
        "failed": failed,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ferry", default="build/ferry")
    ap.add_argument("--model", required=True)
    ap.add_argument("--counts", default="1,2,4")
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between samples")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("extra", nargs="*", help="flags passed to ferry bench (after --)")
    a = ap.parse_args()
    counts = [int(c) for c in a.counts.split(",") if c]
    if not counts or min(counts) < 1:
        ap.error("--counts: positive integers, comma-separated")
    rows = [measure(a.ferry, a.model, n, a.extra, a.interval) for n in counts]
    print(f"{'procs':>5} {'RssAnon max':>12} {'RssFile max':>12} {'used growth':>12}  bench medians")
    for r in rows:
        med = ", ".join("failed" if m is None else f"{m:.3f}s" for m in r["bench_median_s"])
        print(f"{r['processes']:>5} {r['rss_anon_gib_max']:>9.2f} GiB {r['rss_file_gib_max']:>9.2f} GiB "
              f"{r['machine_used_growth_gib']:>9.2f} GiB  {med}")
        for rc, last in r["failed"]:
            print(f"      a process failed (rc {rc}): {last[0]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if any(r["failed"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
