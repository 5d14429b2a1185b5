# PyTorch 2.15's torch.distributed.checkpoint (DCP) on the state of bench/checkpoint_bench.cpp,
# the peer of issue 53's checkpoint benchmark: 4 gloo processes on the CPU, N MiB of float32 in
# all (three Shard(0) DTensors of 1/2, 1/4, 3/16 of it and a Replicate one of 1/16, [rows, 1024]
# each, mesh [4]), the same disk's raw sequential rates in the same run (write() + fsync per
# rank, pread after posix_fadvise(POSIX_FADV_DONTNEED)), the same eviction before each timed
# load, and the same figures:
#   save (dcp.save, FileSystemWriter defaults: fsync'd, one thread) and load (dcp.load in place)
#   GB/s beside the raw rates; load resharded to Shard(1) on [4] and to [Shard(0), Shard(1)] on
#   2x2; dcp.async_save's blocking time beside a copy of the rank's state into touched buffers
#   (with a DefaultStager kept across calls, so staging reuses its buffers as Tessera does, and
#   with async_save's default stager made per call); peak extra resident memory of one load per
#   rank (VmHWM after /proc/self/clear_refs "5", minus VmRSS before) beside one chunk (a rank's
#   shard of the largest tensor).
# Benchmark only; no build or test uses it:
#   /work/venv-torch/bin/python bench/torch_reference/dcp_bench.py [--mib N] [--dir D] [--rounds R]
import argparse
import ctypes
import gc
import mmap
import os
import shutil
import socket
import statistics
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard

RANKS = 4
COLS = 1024
GB = 1e9
MIB = 1 << 20
TENSORS = [("layers.0.weight", 8, False), ("layers.1.weight", 4, False),
           ("layers.2.weight", 3, False), ("embed.weight", 1, True)]
PIECE = 64 << 20  # raw reads in 64 MiB preads, as bench/checkpoint_bench.cpp

libc = ctypes.CDLL("libc.so.6", use_errno=True)


def rows_of(sixteenths, mib):
    return mib * 256 * sixteenths // 16


def values(which, start, rows, col0, cols, global_cols):
    """float32 values of rows [start, start + rows), columns [col0, col0 + cols) of tensor
    `which`: a function of the global index, so a resharded load can be checked."""
    r = np.arange(start, start + rows, dtype=np.uint64)[:, None]
    c = np.arange(col0, col0 + cols, dtype=np.uint64)[None, :]
    s = (r * np.uint64(global_cols) + c + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    s += np.uint64(which * 0xD1B54A32D192ED03 % (1 << 64))  # wraps, as the C++ side's
    s ^= s >> np.uint64(29)
    return ((s >> np.uint64(40)).astype(np.float64) / 16777216.0 - 0.5).astype(np.float32)


def local_box(mesh, placements, shape):
    """(row0, rows, col0, cols) of this rank's shard (even divisions only)."""
    box = [0, shape[0], 0, shape[1]]
    coord = mesh.get_coordinate()
    for d, p in enumerate(placements):
        if isinstance(p, Shard):
            n = mesh.size(d)
            size = box[2 * p.dim + 1] // n
            box[2 * p.dim] += coord[d] * size
            box[2 * p.dim + 1] = size
    return box


def make_state(mesh, sharded, replicated, mib, fill):
    sd = {}
    for i, (key, sixteenths, rep) in enumerate(TENSORS):
        shape = (rows_of(sixteenths, mib), COLS)
        placements = replicated if rep else sharded
        r0, nr, c0, nc = local_box(mesh, placements, shape)
        local = torch.from_numpy(values(i, r0, nr, c0, nc, COLS)) if fill else torch.zeros(nr, nc)
        sd[key] = DTensor.from_local(local, mesh, placements, run_check=False, shape=shape,
                                     stride=(COLS, 1))
    return sd


def mismatches(sd, mesh, mib):
    bad = 0
    for i, (key, sixteenths, rep) in enumerate(TENSORS):
        t = sd[key]
        r0, nr, c0, nc = local_box(mesh, t.placements, (rows_of(sixteenths, mib), COLS))
        bad += int((t.to_local().numpy() != values(i, r0, nr, c0, nc, COLS)).sum())
    return bad


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return -1


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def resident_fraction(path):
    """The fraction of the file's pages in the page cache (mincore on a mapping of it)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0.0
    fd = os.open(path, os.O_RDONLY)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    os.close(fd)
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec)
    libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))
    return sum(v & 1 for v in vec) / pages


def evict_folder(folder):
    worst = 0.0
    for root, _, files in os.walk(folder):
        for name in files:
            p = os.path.join(root, name)
            evict(p)
            worst = max(worst, resident_fraction(p))
    return worst


def write_file(path, buf):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    view = memoryview(buf)
    while len(view):
        view = view[os.write(fd, view):]
    os.fsync(fd)
    os.close(fd)


def read_file(path, buf):
    fd = os.open(path, os.O_RDONLY)
    view = memoryview(buf)
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:done + PIECE]], done)
        if got <= 0:
            raise OSError(f"short read of {path}")
        done += got
    os.close(fd)


def worker(rank, args, work, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # Every round saves over the previous checkpoint, as a training run does (overwrite=True).
    warnings.filterwarnings("ignore", message="Detected an existing checkpoint")
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    # One intra-op thread per rank: 4 ranks on this machine's 2 cores, as Tessera's rank threads.
    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (RANKS,))
    mesh2x2 = init_device_mesh("cpu", (2, 2))
    ckpt = os.path.join(work, "ckpt")
    state = make_state(mesh, [Shard(0)], [Replicate()], args.mib, fill=True)
    resharded = make_state(mesh, [Shard(1)], [Shard(1)], args.mib, fill=False)
    resharded_2x2 = make_state(mesh2x2, [Shard(0), Shard(1)], [Shard(0), Shard(1)], args.mib,
                               fill=False)
    locals_ = [t.to_local() for t in state.values()]
    mine = sum(t.numel() * 4 for t in locals_)
    copies = [torch.zeros_like(t) for t in locals_]  # the copy's touched destination
    state_bytes = args.mib * MIB
    share = state_bytes // RANKS
    scratch = np.ones(max(share, mine), dtype=np.uint8)
    raw_file = os.path.join(work, f"raw-rank{rank}.bin")
    stager = DefaultStager(StagingOptions(False, False, False, False))

    def timed(f):
        dist.barrier()
        t0 = time.perf_counter()
        f()
        dist.barrier()
        return time.perf_counter() - t0

    resident = [0.0]

    def evict_all(folder):
        dist.barrier()
        if rank == 0:
            resident[0] = max(resident[0], evict_folder(folder))
        dist.barrier()

    # Warm-up: a save, and an async_save through the kept stager (its buffers stay).
    dcp.save(state, checkpoint_id=ckpt)
    dcp.async_save(state, checkpoint_id=ckpt, async_stager=stager).result()

    # Peak extra memory of one load (untimed), per process: this rank's own resident growth.
    memory = {}
    for name, into in (("same", state), ("reshard", resharded)):
        evict_all(ckpt)
        gc.collect()
        libc.malloc_trim(0)
        before = status_kib("VmRSS:")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        dist.barrier()
        dcp.load(into, checkpoint_id=ckpt)
        memory[name] = status_kib("VmHWM:") - before
        dist.barrier()

    rounds = []
    for i in range(args.rounds):
        r = {}
        r["raw_write"] = timed(lambda: write_file(raw_file, scratch[:share]))
        r["save"] = timed(lambda: dcp.save(state, checkpoint_id=ckpt))
        evict_all(work)
        r["raw_read"] = timed(lambda: read_file(raw_file, scratch[:share]))
        dist.barrier()
        os.remove(raw_file)
        if i == 0:
            for t in locals_:
                t.zero_()  # the first load must bring every value back
        evict_all(ckpt)
        r["load"] = timed(lambda: dcp.load(state, checkpoint_id=ckpt))
        evict_all(ckpt)
        r["reshard"] = timed(lambda: dcp.load(resharded, checkpoint_id=ckpt))
        evict_all(ckpt)
        r["reshard_2x2"] = timed(lambda: dcp.load(resharded_2x2, checkpoint_id=ckpt))
        if i == 0:
            r["bad"] = (mismatches(state, mesh, args.mib) + mismatches(resharded, mesh, args.mib) +
                        mismatches(resharded_2x2, mesh2x2, args.mib))
        # async_save, the kept stager: the call's blocking time on this rank, then the save.
        dist.barrier()
        t0 = time.perf_counter()
        fut = dcp.async_save(state, checkpoint_id=ckpt, async_stager=stager)
        r["async_block"] = time.perf_counter() - t0
        fut.result()
        dist.barrier()
        r["async_total"] = time.perf_counter() - t0
        # async_save as called plainly: a stager made (and its buffers allocated) per call.
        dist.barrier()
        t0 = time.perf_counter()
        fut = dcp.async_save(state, checkpoint_id=ckpt)
        r["async_default_block"] = time.perf_counter() - t0
        fut.result()
        dist.barrier()
        # The reference: a copy of the rank's local state into touched tensors, all ranks at once.
        best = 1e30
        for _ in range(3):
            dist.barrier()
            t0 = time.perf_counter()
            for dst, src in zip(copies, locals_):
                dst.copy_(src)
            best = min(best, time.perf_counter() - t0)
        r["memcpy"] = best
        dist.barrier()
        rounds.append(r)

    stager.close()
    gathered = [None] * RANKS
    dist.gather_object((rounds, memory, mine, resident[0]), gathered if rank == 0 else None, dst=0)
    if rank == 0:
        report(args, gathered, state_bytes)
    dist.barrier()
    dist.destroy_process_group()


def report(args, gathered, state_bytes):
    rounds = gathered[0][0]
    gbs = lambda s: state_bytes / s / GB  # noqa: E731
    print(f"  {'round':>5} {'raw write':>9} {'save':>9} {'raw read':>9} {'load':>9} "
          f"{'load S(1)':>11} {'load 2x2':>11} {'async blk':>10} {'default':>10} {'copy':>10}")
    print(f"  {'':>5} {'GB/s':>9} {'GB/s':>9} {'GB/s':>9} {'GB/s':>9} {'GB/s':>11} {'GB/s':>11} "
          f"{'ms rank 0':>10} {'ms rank 0':>10} {'ms rank 0':>10}")
    for i, r in enumerate(rounds):
        print(f"  {i + 1:>5} {gbs(r['raw_write']):>9.3f} {gbs(r['save']):>9.3f} "
              f"{gbs(r['raw_read']):>9.3f} {gbs(r['load']):>9.3f} {gbs(r['reshard']):>11.3f} "
              f"{gbs(r['reshard_2x2']):>11.3f} {r['async_block'] * 1e3:>10.1f} "
              f"{r['async_default_block'] * 1e3:>10.1f} {r['memcpy'] * 1e3:>10.1f}")
    med = statistics.median

    def ratio(num, den):
        return med([r[num] / r[den] for r in rounds])

    rw, rr = med([gbs(r["raw_write"]) for r in rounds]), med([gbs(r["raw_read"]) for r in rounds])
    print(f"\n  {'figure':<38} {'value':>12} {'limit':>26} {'ratio':>7} {'target':>8}  status")

    def row(figure, value, limit, x, target, met):
        print(f"  {figure:<38} {value:>12} {limit:>26} {x:>6.2f}x {target:>8}  "
              f"{'met' if met else 'NOT met'}")

    for figure, key, lim, target in (("dcp.save", "save", None, 0.8), ("dcp.load, same placements",
                                     "load", None, 0.8),
                                     ("dcp.load resharded: Shard(1) on [4]", "reshard", None, 0.7),
                                     ("dcp.load resharded: [S(0),S(1)] 2x2", "reshard_2x2", None,
                                      0.7)):
        raw = "raw_write" if key == "save" else "raw_read"
        x = ratio(raw, key)
        row(figure, f"{med([gbs(r[key]) for r in rounds]):.3f} GB/s",
            f"raw {'write' if key == 'save' else 'read'} {rw if key == 'save' else rr:.3f} GB/s",
            x, f">= {target:.2f}", x >= target)
    mine0 = gathered[0][2]
    for figure, key in (("dcp.async_save blocks rank 0 (kept)", "async_block"),
                        ("dcp.async_save blocks rank 0 (default)", "async_default_block")):
        x = ratio(key, "memcpy")
        row(figure, f"{med([r[key] for r in rounds]) * 1e3:.1f} ms",
            f"copy {mine0 / MIB:.0f} MiB {med([r['memcpy'] for r in rounds]) * 1e3:.1f} ms", x,
            "<= 1.50", x <= 1.5)
        worst = med([max(g[0][i][key] / g[0][i]["memcpy"] for g in gathered)
                     for i in range(len(rounds))])
        row("  worst rank", "", "", worst, "<= 1.50", worst <= 1.5)
    chunk_mib = state_bytes * 8 / 16 / RANKS / MIB
    for figure, key in (("dcp.load peak extra RSS, worst rank", "same"),
                        ("resharded load peak extra RSS, worst", "reshard")):
        worst = max(g[1][key] for g in gathered) / 1024
        row(figure, f"{worst:.1f} MiB", f"one chunk {chunk_mib:.0f} MiB", worst / chunk_mib,
            "<= 1.00", worst <= chunk_mib)
    print(f"\n  - ratios: medians of the per-round ratios (GB/s of the {args.mib} MiB of state)")
    print(f"  - async_save (kept stager): whole save {med([r['async_total'] for r in rounds]):.2f} s "
          "after the call (median)")
    print("  - memory per rank (MiB), same / resharded: " +
          ", ".join(f"{g[1]['same'] / 1024:.0f}/{g[1]['reshard'] / 1024:.0f}" for g in gathered))
    print(f"  - page cache: at most {max(g[3] for g in gathered) * 100:.1f}% of a file still "
          "resident after eviction")
    bad = rounds[0]["bad"] + sum(g[0][0]["bad"] for g in gathered[1:])
    print("  - values after the first loads: " +
          ("all elements equal" if bad == 0 else f"{bad} MISMATCHES"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    assert args.mib >= 16 and args.mib % 16 == 0, "--mib: a positive multiple of 16"
    work = tempfile.mkdtemp(prefix="dcp_bench.", dir=args.dir)
    os.makedirs(os.path.join(work, "ckpt"))
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    fs = os.popen(f"df -T {work} | tail -1").read().split()
    print(f"DCP benchmark (torch {torch.__version__}, gloo, {RANKS} processes, 1 intra-op thread "
          f"each): {args.mib} MiB of float32 state, mesh [4]; {args.rounds} rounds, medians")
    print(f"  CPU: {cpu}, {os.cpu_count()} hardware threads")
    print(f"  folder: {work} ({fs[1] if len(fs) > 1 else '?'} on {fs[0] if fs else '?'})\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        mp.spawn(worker, args=(args, work, port), nprocs=RANKS, join=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
