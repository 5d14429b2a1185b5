#!/usr/bin/env python3
"""tessera-shardbench's strategies written with PyTorch's own APIs, for a side-by-side timing.

The model is tessera-shardbench's transformer (tools/shardbench/model.cpp, the blocks of
examples/transformer_block.h): token embedding, pre-norm blocks (ln1 -> q, k, v -> causal
attention -> wo + residual -> ln2 -> up -> exact GELU -> down + residual; every Linear with a
bias, LayerNorm eps 1e-5 with weight and bias), a final LayerNorm, a bias-free vocabulary head
and cross_entropy over every token; AdamW(lr=1e-3) with torch's defaults, which are Tessera's
(betas 0.9/0.999, eps 1e-8, weight decay 0.01), in torch's fastest CPU implementation
(fused=True; --adamw default for torch's own choice, the per-tensor loop).

Strategies, each on the global batch Tessera gives it (strategy.cpp, apply_strategy):
  single   one process, the whole batch
  dp       DistributedDataParallel; each of the N ranks trains batch/N sequences
  tp       parallelize_module (Colwise q, k, v, up; Rowwise wo, down; Rowwise embedding with a
           replicated input; Colwise head with class-sharded DTensor logits) + loss_parallel;
           every rank the whole batch
  sp       the same with SequenceParallel norms (ln1, ln2, final norm) and sequence-sharded
           residuals: embedding output Shard(1), Colwise inputs Shard(1), Rowwise outputs
           Shard(1); ln1's output gathered once for q, k and v (PrepareModuleOutput), so that
           the step issues Tessera's collectives (--sp-gather per_module: each gathers its own)
  fsdp     FSDP2 fully_shard on the embedding, each block, the head, then the root; each rank
           batch/N sequences
  fsdp_tp  2 x N/2 mesh ("dp", "tp"): the TP plan on "tp", fully_shard on "dp" as above; each
           "dp" group batch/2 sequences, loss_parallel

N gloo processes (spawned here, MASTER_ADDR 127.0.0.1 on a free port), one intra-op thread each
(torch.set_num_threads(1)) as Tessera's rank threads; the single-device strategy runs in rank 0
while the others wait at a barrier. Each step: a barrier, then zero_grad + forward + loss
("forward"), backward, optimizer step, timed with perf_counter; a step's time is the slowest
rank's, the phases rank 0's. Rounds: one device then every strategy in turn, as Tessera's tool
does. Median, p10 and p90 over every round's timed steps, computed as tessera-shardbench does.

Every process builds the model after torch.manual_seed(0) and the same batch, so every
strategy's loss follows one device's; the table shows the largest difference ("loss diff").
--collectives counts one more step's collectives per strategy (CommDebugMode), --profile N
prints its top N ops (torch.profiler), both untimed, after the rounds.
Usage: torch_strategies.py [--layers 2 --hidden 256 ...] [--strategies single,dp,...] [--json F]
"""

import argparse
import contextlib
import json
import math
import os
import socket
import sys
import tempfile
import time
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

ALL_STRATEGIES = ["single", "dp", "tp", "sp", "fsdp", "fsdp_tp"]
# tessera-shardbench's names in its table and JSON.
DISPLAY = {"single": "single", "dp": "DP", "tp": "TP", "sp": "SP", "fsdp": "FSDP",
           "fsdp_tp": "FSDP x TP"}
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
# AdamW's implementation: torch's choice (the per-tensor loop for CPU tensors), or forced.
ADAMW_IMPL = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True},
              "loop": {"foreach": False}}
DTYPE_NAMES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16"}
# The loss difference from one device past which the table warns: a few roundings of the loss
# (~7.6 at the default vocabulary) in the dtype, grown over a few AdamW steps.
LOSS_TOLERANCE = {"float32": 1e-4, "float64": 1e-10, "bfloat16": 1e-1}


# ---------------------------------------------------------------------------------------------
# The model


class Block(nn.Module):
    """examples/transformer_block.h's TransformerBlock. Heads are viewed from the tensor's own
    width (-1 heads of head_dim), so a tensor-parallel rank's local q, k, v hold its heads."""

    def __init__(self, hidden, heads, mlp, dtype):
        super().__init__()
        self.head_dim = hidden // heads
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5, dtype=dtype)
        self.wq = nn.Linear(hidden, hidden, dtype=dtype)
        self.wk = nn.Linear(hidden, hidden, dtype=dtype)
        self.wv = nn.Linear(hidden, hidden, dtype=dtype)
        self.wo = nn.Linear(hidden, hidden, dtype=dtype)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5, dtype=dtype)
        self.up = nn.Linear(hidden, mlp, dtype=dtype)
        self.down = nn.Linear(mlp, hidden, dtype=dtype)

    def split_heads(self, t):  # [B, S, A] -> [B, A / head_dim, S, head_dim]
        return t.view(t.shape[0], t.shape[1], -1, self.head_dim).transpose(1, 2)

    def forward(self, x):
        h = self.ln1(x)
        q = self.split_heads(self.wq(h))
        k = self.split_heads(self.wk(h))
        v = self.split_heads(self.wv(h))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        merged = a.transpose(1, 2).reshape(a.shape[0], a.shape[2], -1)
        x1 = x + self.wo(merged)
        return x1 + self.down(F.gelu(self.up(self.ln2(x1))))


class TransformerLM(nn.Module):
    """tools/shardbench/model.cpp's TransformerLM: embed -> blocks -> norm -> head (logits)."""

    def __init__(self, a):
        super().__init__()
        dtype = DTYPES[a.dtype]
        self.embed = nn.Embedding(a.vocab, a.hidden, dtype=dtype)
        self.blocks = nn.ModuleList(
            [Block(a.hidden, a.heads, 4 * a.hidden, dtype) for _ in range(a.layers)])
        self.norm = nn.LayerNorm(a.hidden, eps=1e-5, dtype=dtype)
        self.head = nn.Linear(a.hidden, a.vocab, bias=False, dtype=dtype)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def parameter_count(a):
    h, f = a.hidden, 4 * a.hidden
    block = 2 * 2 * h + 4 * (h * h + h) + (h * f + f) + (f * h + h)
    return a.vocab * h + a.layers * block + 2 * h + h * a.vocab


def make_batch(a):
    g = torch.Generator().manual_seed(4321)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    target = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    return ids, target


def loss_of(a, logits, target):
    return F.cross_entropy(logits.reshape(-1, a.vocab), target.reshape(-1))


# ---------------------------------------------------------------------------------------------
# The strategies, with torch's APIs


def tensor_parallel_plan(sequence_parallel, shared_gather=False):
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   SequenceParallel)
    if not sequence_parallel:
        plan = {"embed": RowwiseParallel(input_layouts=Replicate()),
                "head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)}
        block = {"wq": ColwiseParallel(), "wk": ColwiseParallel(), "wv": ColwiseParallel(),
                 "wo": RowwiseParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()}
    else:
        plan = {"embed": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1),
                                         use_local_output=False),
                "norm": SequenceParallel(),
                "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1),
                                        use_local_output=False)}
        colwise = lambda: ColwiseParallel(input_layouts=Shard(1))  # noqa: E731
        rowwise = lambda: RowwiseParallel(output_layouts=Shard(1), use_local_output=False)  # noqa
        # q, k and v read ln1's output: gathered by each (per_module) or once (shared: see
        # shared_gather_plan, q, k and v then take the gathered, replicated input).
        qkv = ColwiseParallel if shared_gather else colwise
        block = {"ln1": SequenceParallel(), "wq": qkv(), "wk": qkv(), "wv": qkv(),
                 "wo": rowwise(), "ln2": SequenceParallel(), "up": colwise(), "down": rowwise()}
    for name, style in block.items():
        plan["blocks.*." + name] = style
    return plan


def shared_gather_plan():
    """Applied after the SP plan: ln1's sequence-sharded output all_gathered once for q, k and v
    (forward), their input gradients summed and reduce_scattered once (backward), as Tessera's
    SP step does; per module, each of the three gathers its input and reduce_scatters its
    gradient."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import PrepareModuleOutput
    return {"blocks.*.ln1": PrepareModuleOutput(output_layouts=Shard(1),
                                                desired_output_layouts=Replicate(),
                                                use_local_output=False)}


def fully_shard_units(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.embed, mesh=mesh)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model.head, mesh=mesh)
    fully_shard(model, mesh=mesh)


class Applied:
    """A strategy applied on this rank: what to call, its data, how to read the whole loss."""

    def __init__(self, module, ids, target, loss_parallel=False, dp_group=None):
        self.module, self.ids, self.target = module, ids, target
        self.loss_parallel = loss_parallel
        self.dp_group = dp_group  # ranks whose losses average to the whole batch's


def rows_of(t, parts, index):
    n = t.shape[0] // parts
    return t[index * n:(index + 1) * n].contiguous()


def apply_strategy(name, a, model, ids, target, meshes):
    from torch.distributed.tensor.parallel import parallelize_module
    if name == "single":
        return Applied(model, ids, target)
    rank, world = dist.get_rank(), dist.get_world_size()
    if name == "dp":
        from torch.nn.parallel import DistributedDataParallel
        return Applied(DistributedDataParallel(model), rows_of(ids, world, rank),
                       rows_of(target, world, rank), dp_group=dist.group.WORLD)
    if name == "tp":
        parallelize_module(model, meshes["1d"], tensor_parallel_plan(False))
        return Applied(model, ids, target, loss_parallel=True)
    if name == "sp":
        shared = a.sp_gather == "shared"
        parallelize_module(model, meshes["1d"], tensor_parallel_plan(True, shared))
        if shared:
            parallelize_module(model, meshes["1d"], shared_gather_plan())
        return Applied(model, ids, target, loss_parallel=True)
    if name == "fsdp":
        fully_shard_units(model, meshes["1d"])
        return Applied(model, rows_of(ids, world, rank), rows_of(target, world, rank),
                       dp_group=dist.group.WORLD)
    if name == "fsdp_tp":
        mesh = meshes["2d"]
        parallelize_module(model, mesh["tp"], tensor_parallel_plan(False))
        fully_shard_units(model, mesh["dp"])
        dp, r = mesh["dp"].size(), mesh["dp"].get_local_rank()
        return Applied(model, rows_of(ids, dp, r), rows_of(target, dp, r), loss_parallel=True,
                       dp_group=mesh["dp"].get_group())
    raise ValueError(name)


def whole_loss(applied, loss):
    from torch.distributed.tensor import DTensor
    value = loss.detach()
    if isinstance(value, DTensor):
        value = value.full_tensor()
    value = value.to(torch.float64).reshape(1).clone()
    if applied.dp_group is not None:  # each rank's loss: the mean over its equal share of rows
        dist.all_reduce(value, op=dist.ReduceOp.AVG, group=applied.dp_group)
    return value.item()


# ---------------------------------------------------------------------------------------------
# Training and timing


def make_optimizer(a, model):
    """AdamW(lr=1e-3). The foreach and fused kernels take the tensors of one param group at a
    time and cannot mix DTensor and plain parameters (TP leaves the norms plain): there, one group
    of each."""
    from torch.distributed.tensor import DTensor
    params = list(model.parameters())
    groups = [[p for p in params if isinstance(p, DTensor)],
              [p for p in params if not isinstance(p, DTensor)]]
    if a.adamw in ("foreach", "fused") and all(groups):
        params = [{"params": g} for g in groups]
    return torch.optim.AdamW(params, lr=1e-3, **ADAMW_IMPL[a.adamw])


def train(name, a, batch, meshes, extra=None):
    """Warm-up + timed steps of one strategy on this rank: per timed step its time and phases,
    and every step's whole-batch loss. With `extra` (a context manager), one more step after
    them inside it (a profiler, a collective counter), not timed."""
    from torch.distributed.tensor.parallel import loss_parallel
    torch.manual_seed(0)
    model = TransformerLM(a)
    applied = apply_strategy(name, a, model, batch[0], batch[1], meshes)
    opt = make_optimizer(a, model)
    distributed = name != "single"
    figures = {"step": [], "forward": [], "backward": [], "optimizer": [], "losses": []}
    total = a.warmup + a.steps
    for step in range(total + (1 if extra is not None else 0)):
        around = extra if step == total else contextlib.nullcontext()
        if distributed:
            dist.barrier()
        with around:
            t0 = time.perf_counter()
            opt.zero_grad()
            # loss_parallel's backward must run inside the context too.
            with loss_parallel() if applied.loss_parallel else contextlib.nullcontext():
                loss = loss_of(a, applied.module(applied.ids), applied.target)
                t_forward = time.perf_counter() - t0
                loss.backward()
                t_backward = time.perf_counter() - t0 - t_forward
            opt.step()
            t_all = time.perf_counter() - t0
        if step == total:
            break
        figures["losses"].append(whole_loss(applied, loss) if distributed else loss.item())
        if step < a.warmup:
            continue
        figures["step"].append(t_all)
        figures["forward"].append(t_forward)
        figures["backward"].append(t_backward)
        figures["optimizer"].append(t_all - t_forward - t_backward)
    if distributed:  # a step takes as long as its slowest rank
        steps = torch.tensor(figures["step"], dtype=torch.float64)
        dist.all_reduce(steps, op=dist.ReduceOp.MAX)
        figures["step"] = steps.tolist()
    return figures


def profile_table(name, a, batch, meshes):
    """One step of `name` under torch.profiler on this rank: its top ops by self CPU time."""
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    train(name, a, batch, meshes, extra=profiler)
    return profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.profile)


def collective_counts(name, a, batch, meshes):
    """The collectives one step of `name` issues on this rank, by kind, as CommDebugMode counts
    them (DTensor's functional collectives, the c10d ops of FSDP and DDP's buckets)."""
    from torch.distributed.tensor.debug import CommDebugMode
    counter = CommDebugMode()
    train(name, a, batch, meshes, extra=counter)
    return {str(k).split(".")[-1]: v for k, v in counter.get_comm_counts().items()}


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else 0.0


def percentile(v, p):  # tessera-shardbench's (measure.cpp)
    v = sorted(v)
    return v[int(p * (len(v) - 1))] if v else 0.0


def worker(rank, a, port, result_path):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    # FSDP2 warns that the embedding's output is a view (an in-place op on it would skip a
    # hook); the model only adds out of place.
    warnings.filterwarnings("ignore", message=".*returned a view tensor.*")
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    try:
        from torch.distributed.device_mesh import init_device_mesh
        meshes = {"1d": init_device_mesh("cpu", (a.ranks,))}
        if "fsdp_tp" in a.strategies:
            meshes["2d"] = init_device_mesh("cpu", (2, a.ranks // 2), mesh_dim_names=("dp", "tp"))
        batch = make_batch(a)
        runs = {name: [] for name in ALL_STRATEGIES}
        one_device = []  # every round; the losses every strategy must follow
        dist.barrier()
        t_start = time.perf_counter()
        for _ in range(a.rounds):
            if rank == 0:
                one_device.append(train("single", a, batch, meshes))
            dist.barrier()  # the other ranks wait here while rank 0 runs one device
            for name in a.strategies:
                if name != "single":
                    runs[name].append(train(name, a, batch, meshes))
        elapsed = time.perf_counter() - t_start
        profiles, collectives = {}, {}
        for name in a.strategies:  # after the timed rounds: untimed steps
            if name == "single":  # rank 0 alone, the others waiting
                if rank == 0 and a.profile:
                    profiles[name] = profile_table(name, a, batch, meshes)
                dist.barrier()
                continue
            if a.profile:
                profiles[name] = profile_table(name, a, batch, meshes)
            if a.collectives:
                collectives[name] = collective_counts(name, a, batch, meshes)
        if rank == 0:
            runs["single"] = one_device
            with open(result_path, "w") as f:
                json.dump(summarize(a, runs, elapsed, profiles, collectives), f)
    finally:
        dist.destroy_process_group()


def summarize(a, runs, elapsed, profiles, collectives):
    reference = runs["single"][0]["losses"]
    strategies = []
    for name in a.strategies:
        rounds = runs[name]
        cat = lambda key: [x for r in rounds for x in r[key]]  # noqa: E731
        steps = cat("step")
        losses = rounds[0]["losses"]
        strategies.append({
            "name": DISPLAY[name],
            "mesh": [] if name == "single" else [2, a.ranks // 2] if name == "fsdp_tp"
            else [a.ranks],
            "step_s_median": median(steps),
            "step_s_p10": percentile(steps, 0.1),
            "step_s_p90": percentile(steps, 0.9),
            "forward_s": median(cat("forward")),
            "backward_s": median(cat("backward")),
            "optimizer_s": median(cat("optimizer")),
            "loss_error": max(abs(x - y) for x, y in zip(losses, reference)),
            "losses": losses,
            "step_s": steps,
        })
        if name in collectives:
            strategies[-1]["collective_counts"] = collectives[name]
    return {
        "framework": "torch",
        "torch_version": torch.__version__,
        "backend": "gloo",
        "processes": a.ranks,
        "intra_op_threads": 1,
        "adamw": a.adamw,
        "sp_gather": a.sp_gather,
        "model": {"preset": "transformer", "layers": a.layers, "hidden": a.hidden,
                  "heads": a.heads, "seq": a.seq, "batch": a.batch, "vocab": a.vocab,
                  "dtype": DTYPE_NAMES[a.dtype], "parameters": parameter_count(a)},
        "steps": a.steps, "warmup": a.warmup, "rounds": a.rounds,
        "elapsed_s": elapsed,
        "strategies": strategies,
        "profiles": profiles,
    }


# ---------------------------------------------------------------------------------------------
# Command line and report


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="tessera-shardbench's strategies with PyTorch's APIs (4 gloo processes).")

    def size(text):
        value = int(text)
        if value < 1:
            raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
        return value

    p.add_argument("--layers", type=size, default=2)
    p.add_argument("--hidden", type=size, default=256)
    p.add_argument("--heads", type=size, default=8)
    p.add_argument("--seq", type=size, default=64)
    p.add_argument("--batch", type=size, default=8)
    p.add_argument("--vocab", type=size, default=2048)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    p.add_argument("--ranks", type=size, default=4, help="gloo processes (default 4)")
    p.add_argument("--strategies", default=",".join(ALL_STRATEGIES),
                   help="comma-separated from " + ", ".join(ALL_STRATEGIES) + " (default all)")
    p.add_argument("--steps", type=size, default=4, help="timed steps per round (default 4)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per round (default 1)")
    p.add_argument("--rounds", type=size, default=3, help="rounds over all strategies (default 3)")
    p.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    p.add_argument("--adamw", choices=sorted(ADAMW_IMPL), default="fused",
                   help="AdamW's implementation: fused (default: torch's fastest on CPU), "
                   "foreach, loop, or default (torch's own choice: the loop for CPU tensors)")
    p.add_argument("--sp-gather", choices=["shared", "per_module"], default="shared",
                   help="sp: ln1's output gathered once for q, k and v (default, as Tessera's "
                   "step) or by each of them")
    p.add_argument("--collectives", action="store_true",
                   help="after the timed rounds, count the collectives of one more step of each "
                   "strategy on rank 0 (CommDebugMode; DDP's buckets from DDP's logging data)")
    p.add_argument("--profile", type=int, default=0, metavar="ROWS",
                   help="after the timed rounds, profile one more step of each strategy on "
                   "rank 0 and print its top ROWS ops by self CPU time")
    a = p.parse_args(argv)
    a.strategies = [s.strip() for s in a.strategies.split(",") if s.strip()]
    for s in a.strategies:
        if s not in ALL_STRATEGIES:
            p.error(f"unknown strategy '{s}'; valid: {', '.join(ALL_STRATEGIES)}")
    if not a.strategies:
        p.error("--strategies is empty")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    if a.hidden % a.heads:
        p.error(f"--heads {a.heads} must divide --hidden {a.hidden}")
    parallel = [s for s in a.strategies if s != "single"]
    if parallel and a.ranks < 2:
        p.error(f"strategies {', '.join(parallel)} need --ranks >= 2")
    for s in parallel:
        dp = {"dp": a.ranks, "fsdp": a.ranks, "fsdp_tp": 2}.get(s)
        if dp and a.batch % dp:
            p.error(f"{s} gives each of its {dp} data-parallel ranks an equal share of the batch; "
                    f"--batch {a.batch} is not a multiple of {dp}")
        tp = {"tp": a.ranks, "sp": a.ranks, "fsdp_tp": a.ranks // 2}.get(s)
        if s == "fsdp_tp" and a.ranks % 2:
            p.error(f"fsdp_tp lays the ranks out as 2 x ranks/2; --ranks {a.ranks} is odd")
        if tp and (a.heads % tp or a.vocab % tp or (4 * a.hidden) % tp):
            p.error(f"{s} shards heads, vocabulary and MLP width {tp} ways; --heads {a.heads}, "
                    f"--vocab {a.vocab} and 4 x --hidden must be multiples of {tp}")
        if s == "sp" and a.seq % a.ranks:
            p.error(f"sp shards the sequence {a.ranks} ways; --seq {a.seq} is not a multiple")
    return a


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def table(r):
    m = r["model"]
    lines = [
        f"torch {r['torch_version']}, {r['processes']} gloo processes x {r['intra_op_threads']} "
        f"intra-op thread; transformer: {m['layers']} layers, hidden {m['hidden']}, "
        f"{m['heads']} heads, batch {m['batch']} x seq {m['seq']}, vocab {m['vocab']}, "
        f"{m['dtype']}; {m['parameters'] / 1e6:.1f} M parameters",
        f"{r['rounds']} round(s) of {r['warmup']} warm-up + {r['steps']} timed steps per strategy "
        f"({r['elapsed_s']:.1f} s); AdamW: {r['adamw']}; SP's q, k, v gather: {r['sp_gather']}",
        f"{'strategy':<10} {'step ms':>9} {'p10-p90 ms':>15} {'fwd ms':>8} {'bwd ms':>8} "
        f"{'opt ms':>8} {'loss 0':>8} {'loss last':>9} {'loss diff':>9}",
    ]
    for s in r["strategies"]:
        lines.append(
            f"{s['name']:<10} {s['step_s_median'] * 1e3:>9.2f} "
            f"{s['step_s_p10'] * 1e3:>7.2f}-{s['step_s_p90'] * 1e3:<7.2f} "
            f"{s['forward_s'] * 1e3:>8.2f} {s['backward_s'] * 1e3:>8.2f} "
            f"{s['optimizer_s'] * 1e3:>8.2f} {s['losses'][0]:>8.4f} {s['losses'][-1]:>9.4f} "
            f"{s['loss_error']:>9.1e}")
    lines.append(f"loss 0 against ln(vocab) = {math.log(m['vocab']):.4f}; loss diff: the largest "
                 "|loss - one device's loss| over the first round's steps")
    tolerance = LOSS_TOLERANCE[m["dtype"]]
    for s in r["strategies"]:
        if "collective_counts" in s:
            counts = ", ".join(f"{k} {v}x" for k, v in sorted(s["collective_counts"].items()))
            lines.append(f"{s['name']}: collectives in one step on rank 0: {counts or 'none'}")
    for s in r["strategies"]:
        if s["loss_error"] > tolerance:
            lines.append(f"warning: {s['name']}'s losses differ from one device's by "
                         f"{s['loss_error']:.1e} (more than {tolerance:.0e} in {m['dtype']})")
    if len(r["strategies"][0]["losses"]) > 1 and not all(
            s["losses"][-1] < s["losses"][0] for s in r["strategies"]):
        lines.append("warning: a strategy's loss did not decrease")
    return "\n".join(lines) + "\n"


def main(argv):
    a = parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "result.json")
        mp.start_processes(worker, args=(a, free_port(), path), nprocs=a.ranks, join=True,
                           start_method="spawn")
        with open(path) as f:
            result = json.load(f)
    print(table(result), end="")
    for name, text in result.pop("profiles").items():
        print(f"\n{DISPLAY[name]}: one step on rank 0, top {a.profile} ops by self CPU time")
        print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        print(f"JSON: {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
