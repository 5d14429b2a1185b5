# PyTorch 2.15 reference for tests/dtensor/strategies_test.cpp and dtensor_ops_comm_test.cpp:
# the collectives (kind, count, bytes as CommDebugMode and nccl-tests count them) of one SP
# training step of examples/transformer_block.h under its SP plan, and of layer_norm over a
# sharded normalized dim, on 4 gloo ranks (CPU, float64). Not used by any build or test:
#   pip install --no-deps torch==2.15.0 (+ its pure-Python deps), then
#   USE_SDPA=0 python bench/torch_reference/sp_step_collectives.py
# (SDPA has no DTensor strategy on CPU in 2.15: USE_SDPA=0 writes the causal attention out).
import os, sys, math
from collections import defaultdict
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, Replicate
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
    SequenceParallel, parallelize_module)

USE_SDPA = os.environ.get("USE_SDPA", "1") == "1"
LOSS_MODE = os.environ.get("LOSS_MODE", "direct")  # direct | full

class ByteMode(CommDebugMode):
    """CommDebugMode that additionally records each collective's shape/bytes."""
    def __init__(self):
        super().__init__()
        self.records = []
        self.last_dt_op = None
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(t == DTensor for t in types):
            self.last_dt_op = str(func)
        if any(t == DTensor for t in types) or isinstance(func, torch._ops.HigherOrderOperator):
            return super().__torch_dispatch__(func, types, args, kwargs)
        from torch.distributed.tensor.debug._comm_mode import c10d_collective_ops, NATIVE_TO_PY_MAPPING
        pk = func._overloadpacket
        if pk in self.comm_registry or pk in c10d_collective_ops:
            name = NATIVE_TO_PY_MAPPING.get(pk, pk)
            a0 = args[0]
            tens = list(a0) if isinstance(a0, (list, tuple)) else [a0]
            tens = [t for t in tens if isinstance(t, torch.Tensor)]
            in_bytes = sum(t.numel() * t.element_size() for t in tens)
            shapes = [tuple(t.shape) for t in tens]
            dt = tens[0].dtype if tens else None
            s = str(name).split('.')[-1]
            extra = [a for a in args[1:] if isinstance(a, (str, int))]
            if "all_gather" in s:
                gs = args[1]
                nbytes = in_bytes * gs
            else:
                nbytes = in_bytes
            self.records.append(dict(name=s, shapes=shapes, dtype=str(dt), bytes=nbytes,
                                     in_bytes=in_bytes, extra=extra,
                                     module=self.advanced_module_tracker.name,
                                     bw=self.advanced_module_tracker.is_bw, op=self.last_dt_op))
        return super().__torch_dispatch__(func, types, args, kwargs)

def report(rank, title, m):
    if rank != 0:
        return
    counts = {str(k).split('.')[-1]: v for k, v in m.get_comm_counts().items()}
    tot = defaultdict(int)
    for r in m.records:
        tot[r["name"]] += r["bytes"]
    print(f"=== {title}: total={m.get_total_counts()} counts={counts} bytes_by_kind={dict(tot)} total_bytes={sum(tot.values())}")
    for r in m.records:
        print(f"     {r['name']:<28} shapes={r['shapes']} {r['dtype']} bytes={r['bytes']} args={r['extra']} module={r['module']} during={r['op']}")

class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1 = nn.LayerNorm(8, dtype=torch.float64)
        s.wq = nn.Linear(8, 8, dtype=torch.float64); s.wk = nn.Linear(8, 8, dtype=torch.float64); s.wv = nn.Linear(8, 8, dtype=torch.float64)
        s.wo = nn.Linear(8, 8, dtype=torch.float64)
        s.ln2 = nn.LayerNorm(8, dtype=torch.float64)
        s.up = nn.Linear(8, 16, dtype=torch.float64); s.down = nn.Linear(16, 8, dtype=torch.float64)
    def heads(s, t): return t.view(t.size(0), t.size(1), 4, 2).transpose(1, 2)
    def forward(s, x):
        h = s.ln1(x)
        q, k, v = s.heads(s.wq(h)), s.heads(s.wk(h)), s.heads(s.wv(h))
        if USE_SDPA:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            L = q.size(2)
            sc = q @ k.transpose(-2, -1) / math.sqrt(2)
            mask = torch.ones(L, L, dtype=torch.bool).tril().logical_not()
            if isinstance(sc, DTensor):  # plain tensor -> Replicate DTensor (no communication)
                mask = DTensor.from_local(mask, sc.device_mesh, [Replicate()] * sc.device_mesh.ndim)
            sc = sc.masked_fill(mask, float("-inf"))
            a = torch.softmax(sc, -1) @ v
        merged = a.transpose(1, 2).reshape(a.size(0), a.size(2), 8)
        x1 = x + s.wo(merged)
        return x1 + s.down(F.gelu(s.up(s.ln2(x1))))

def pl(t):
    return tuple(t.placements) if isinstance(t, DTensor) else type(t).__name__

def worker(rank, world):
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = "29533"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    block = Block()
    x_full = torch.randn(2, 8, 8, dtype=torch.float64)
    y_full = torch.randn(2, 8, 8, dtype=torch.float64)
    colwise = ColwiseParallel(input_layouts=Shard(1), use_local_output=False)
    rowwise = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
    plan = {"ln1": SequenceParallel(), "wq": colwise, "wk": colwise, "wv": colwise, "wo": rowwise,
            "ln2": SequenceParallel(), "up": colwise, "down": rowwise}
    parallelize_module(block, mesh, plan)
    if rank == 0:
        print("torch", torch.__version__, "USE_SDPA", USE_SDPA, "LOSS_MODE", LOSS_MODE)
        for n, p in block.named_parameters():
            print("  param", n, tuple(p.shape), pl(p))
    FE = os.environ.get("OPT_FOREACH")
    opt = torch.optim.AdamW(block.parameters(), lr=0.05, foreach=None if FE is None else FE == "1")
    if rank == 0: print("AdamW foreach arg:", opt.defaults["foreach"])
    sl = 8 // world
    x = DTensor.from_local(x_full[:, rank*sl:(rank+1)*sl].contiguous(), mesh, [Shard(1)])
    y = DTensor.from_local(y_full[:, rank*sl:(rank+1)*sl].contiguous(), mesh, [Shard(1)])
    for step in (1, 2):
        opt.zero_grad()
        with ByteMode() as m:
            out = block(x)
        report(rank, f"step{step} (a) forward (block only)", m)
        if rank == 0: print("     out placements", pl(out))
        with ByteMode() as m:
            loss = ((out - y) ** 2).mean()
            if LOSS_MODE == "full":
                loss = loss.full_tensor()
        report(rank, f"step{step} (a') loss computation", m)
        if rank == 0: print("     loss placements", pl(loss))
        with ByteMode() as m:
            loss.backward()
        report(rank, f"step{step} (b) backward", m)
        if rank == 0:
            for n, p in block.named_parameters():
                print("     grad", n, pl(p.grad))
        with ByteMode() as m:
            opt.step()
        report(rank, f"step{step} (c) optimizer.step", m)
        lv = loss.full_tensor().item() if isinstance(loss, DTensor) else loss.item()
        if rank == 0: print(f"     loss value step{step} = {lv:.12f}")
    # reference check (single process, no parallelism)
    if rank == 0:
        torch.manual_seed(0)
        ref = Block(); xr = torch.randn(2, 8, 8, dtype=torch.float64); yr = torch.randn(2, 8, 8, dtype=torch.float64)
        o2 = torch.optim.AdamW(ref.parameters(), lr=0.05)
        for step in (1, 2):
            o2.zero_grad(); l = ((ref(xr) - yr) ** 2).mean(); l.backward(); o2.step()
            print(f"     reference loss step{step} = {l.item():.12f}")
        maxdiff = max((p.full_tensor() - q).abs().max().item() for p, q in zip(block.parameters(), ref.parameters()))
        print("     max |param diff| vs reference after 2 steps:", maxdiff)
    else:
        for p in block.parameters(): p.full_tensor()  # match collectives with rank 0
    dist.barrier()

    # ---- second measurement: layer_norm with normalized dim sharded
    torch.manual_seed(1)
    xf = torch.randn(4, 8, dtype=torch.float64); wf = torch.randn(8, dtype=torch.float64); bf = torch.randn(8, dtype=torch.float64)
    from torch.distributed.tensor import distribute_tensor
    xl = distribute_tensor(xf, mesh, [Shard(1)]).detach().requires_grad_()
    w = distribute_tensor(wf, mesh, [Replicate()]).detach().requires_grad_()
    b = distribute_tensor(bf, mesh, [Replicate()]).detach().requires_grad_()
    with ByteMode() as m:
        o = F.layer_norm(xl, [8], w, b)
    report(rank, "LN-sharded forward (layer_norm only)", m)
    if rank == 0: print("     out placements", pl(o))
    with ByteMode() as m:
        s = o.sum()
    report(rank, "LN-sharded out.sum()", m)
    if rank == 0: print("     sum placements", pl(s))
    with ByteMode() as m:
        s.backward()
    report(rank, "LN-sharded backward", m)
    if rank == 0:
        print("     grad x", pl(xl.grad), " grad w", pl(w.grad), " grad b", pl(b.grad))
        # check values
        xr = xf.clone().requires_grad_(); wr = wf.clone().requires_grad_(); br = bf.clone().requires_grad_()
        F.layer_norm(xr, [8], wr, br).sum().backward()
    gx, gw, gb = xl.grad.full_tensor(), w.grad.full_tensor(), b.grad.full_tensor()
    if rank == 0:
        print("     max diffs vs ref: x", (gx - xr.grad).abs().max().item(), "w", (gw - wr.grad).abs().max().item(), "b", (gb - br.grad).abs().max().item())
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(worker, args=(4,), nprocs=4, join=True)
