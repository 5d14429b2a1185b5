#!/usr/bin/env python3
"""Side by side: tessera-shardbench's JSON (--json) beside torch_strategies.py's, per strategy.

  compare.py TESSERA.json TORCH.json [TESSERA2.json TORCH2.json ...]

Each pair is one run (the two programs run one after the other); per run a table of the median
step (p10-p90) of both, the ratio Tessera / torch of the step and of its forward, backward and
optimizer phases, and whether the step meets issue 56's target (<= 0.7x torch's; one device
<= 0.8x). With several runs, a summary of every run's ratio per strategy last. Figures are the
programs' own (both take the median over all timed steps of all rounds, p10/p90 as
tessera-shardbench's measure.cpp). Plain Python, no dependencies; exit 2 on unreadable input or
runs of different models, otherwise 0 (targets are reported, not enforced) unless --strict.
"""

import argparse
import json
import sys

TARGETS = {"single": 0.8}  # the rest: DEFAULT_TARGET
DEFAULT_TARGET = 0.7
MODEL_KEYS = ["preset", "layers", "hidden", "heads", "seq", "batch", "vocab", "dtype"]
PHASES = [("forward_s", "fwd"), ("backward_s", "bwd"), ("optimizer_s", "opt")]


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"compare.py: cannot read {path}: {e}")
    if "strategies" not in data or "model" not in data:
        sys.exit(f"compare.py: {path} has no 'strategies' and 'model' (not a tessera-shardbench "
                 "or torch_strategies.py JSON)")
    return data


def target_of(name):
    return TARGETS.get(name, DEFAULT_TARGET)


def ms(s, key):
    v = s.get(key)
    return None if v is None else v * 1e3


def fmt_ms(v, width=7):
    return f"{'-':>{width}}" if v is None else f"{v:>{width}.2f}"


def ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def fmt_ratio(r, width=6):
    return f"{'-':>{width}}" if r is None else f"{r:>{width}.2f}"


def describe(data, path):
    if data.get("framework") == "torch":
        return (f"torch {data.get('torch_version', '?')}: {data.get('processes', '?')} "
                f"{data.get('backend', '?')} processes x {data.get('intra_op_threads', '?')} "
                f"thread, AdamW {data.get('adamw', '?')} ({path})")
    # How it ran: its JSON's "ranks" ({"backend": "mpi", "processes": 4, ...}); none in the JSON
    # of a tessera-shardbench that only ran rank threads.
    info = data.get("ranks")
    if not isinstance(info, dict):
        return f"tessera-shardbench: rank threads of one process ({path})"
    if {"backend", "processes"} <= info.keys():
        text = f"{info['processes']} {info['backend']} processes"
        if "intra_op_threads_per_rank" in info:
            text += f" x {info['intra_op_threads_per_rank']} intra-op thread"
    else:
        text = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in info.items())
    return f"tessera-shardbench: {text} ({path})"


def check_same_model(t, p, tpath, ppath):
    differ = [k for k in MODEL_KEYS if k in t["model"] and k in p["model"]
              and t["model"][k] != p["model"][k]]
    if differ:
        sys.exit("compare.py: the runs trained different models: " + ", ".join(
            f"{k} {t['model'][k]} ({tpath}) vs {p['model'][k]} ({ppath})" for k in differ))


def compare_run(index, tpath, ppath, t, p):
    """The table of one run, and {strategy name: step ratio}."""
    check_same_model(t, p, tpath, ppath)
    m = t["model"]
    lines = [f"run {index}: {m['preset']} {m['layers']} layers, hidden {m['hidden']}, "
             f"{m['heads']} heads, batch {m['batch']} x seq {m['seq']}, vocab {m['vocab']}, "
             f"{m['dtype']}",
             "  " + describe(t, tpath), "  " + describe(p, ppath)]
    head = (f"{'strategy':<10} {'tessera ms':>10} {'p10-p90':>15}  {'torch ms':>9} "
            f"{'p10-p90':>15}  {'ratio':>6} {'target':>6} {'met':>4}  "
            + " ".join(f"{label + ' x':>6}" for _, label in PHASES)
            + f"  {'loss diff T/t':>15}")
    lines.append(head)
    tessera = {s["name"]: s for s in t["strategies"]}
    torch = {s["name"]: s for s in p["strategies"]}
    names = [s["name"] for s in t["strategies"]]
    names += [s["name"] for s in p["strategies"] if s["name"] not in tessera]
    ratios = {}
    for name in names:
        a, b = tessera.get(name, {}), torch.get(name, {})
        r = ratio(ms(a, "step_s_median"), ms(b, "step_s_median"))
        ratios[name] = r
        met = "-" if r is None else "yes" if r <= target_of(name) else "no"
        spread = lambda s: ("-" if ms(s, "step_s_p10") is None else  # noqa: E731
                            f"{ms(s, 'step_s_p10'):.2f}-{ms(s, 'step_s_p90'):.2f}")
        loss = lambda s: "-" if s.get("loss_error") is None else f"{s['loss_error']:.0e}"  # noqa
        lines.append(
            f"{name:<10} {fmt_ms(ms(a, 'step_s_median'), 10)} {spread(a):>15}  "
            f"{fmt_ms(ms(b, 'step_s_median'), 9)} {spread(b):>15}  {fmt_ratio(r)} "
            f"{'<=' + format(target_of(name), '.1f'):>6} {met:>4}  "
            + " ".join(fmt_ratio(ratio(ms(a, key), ms(b, key))) for key, _ in PHASES)
            + f"  {loss(a) + ' / ' + loss(b):>15}")
    for w in t.get("warnings", []):
        lines.append(f"  tessera warning: {w.get('text', w)}")
    for key in ("other_processes", "steal"):
        if isinstance(t.get(key), (int, float)) and t[key] > (0.03 if key == "steal" else 0.1):
            lines.append(f"  tessera's run: {key.replace('_', ' ')} took {100 * t[key]:.0f}% of "
                         "the CPU time")
    return "\n".join(lines) + "\n", ratios


def summary(all_ratios):
    names = []
    for ratios in all_ratios:
        names += [n for n in ratios if n not in names]
    lines = [f"ratio Tessera / torch of the median step, per run (target: <= {DEFAULT_TARGET}, "
             f"one device <= {TARGETS['single']})",
             f"{'strategy':<10} " + " ".join(f"{'run ' + str(i + 1):>7}"
                                             for i in range(len(all_ratios)))
             + f" {'worst':>7} {'met in every run':>17}"]
    every = True
    for name in names:
        rs = [r.get(name) for r in all_ratios]
        known = [r for r in rs if r is not None]
        worst = max(known) if known else None
        met = bool(known) and len(known) == len(rs) and worst <= target_of(name)
        every = every and met
        lines.append(f"{name:<10} " + " ".join(fmt_ratio(r, 7) for r in rs)
                     + f" {fmt_ratio(worst, 7)} {'yes' if met else 'no':>17}")
    return "\n".join(lines) + "\n", every


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", metavar="JSON",
                    help="pairs: tessera-shardbench's JSON then torch_strategies.py's, per run")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when a strategy misses its target in some run")
    a = ap.parse_args(argv)
    if len(a.files) % 2:
        ap.error("expected pairs of files (TESSERA.json TORCH.json), got an odd count")
    all_ratios = []
    for i in range(0, len(a.files), 2):
        tpath, ppath = a.files[i], a.files[i + 1]
        text, ratios = compare_run(i // 2 + 1, tpath, ppath, load(tpath), load(ppath))
        print(text)
        all_ratios.append(ratios)
    text, every = summary(all_ratios)
    print(text, end="")
    return 1 if a.strict and not every else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
