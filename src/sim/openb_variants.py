#!/usr/bin/env python3
"""Variants of the openb pod list, as the FGD paper's families (Weng et al., ATC'23, Sec. 6).

The paper's repository (hkust-adsl/kubernetes-scheduler-simulator, data/csv/) ships the variant
CSVs but not the script that sampled them; this reproduces the families from what the files show
(docs/benchmarks.md, "Variants"). Every family starts from openb_pod_list_default.csv:

  gpushareP  CPU-only tasks kept; the 7,064 GPU tasks redrawn with replacement, shared ones from
             the default's shared tasks and the rest from its whole-GPU ones, so that shared tasks
             ask for P% of the GPU milli requested (the paper's files: 20.0%, 40.1%, 60.0% ...).
  multigpuP  every task kept; multi-GPU tasks drawn with replacement from the default's added
             until they ask for P% of the GPU milli requested.
  gpuspecP   every task kept; P% of the GPU tasks, drawn at random, get a GPU-model constraint
             drawn from the constraints that tasks of the same kind (shared, 1, 2, 4, 8 GPUs) carry
             in --spec-from (a list with constraints, e.g. openb_pod_list_gpuspec20.csv).
  cpuP       GPU tasks kept; CPU-only tasks drawn with replacement from the default's until they
             ask for P% of the CPU of the CPU-only nodes in --all-nodes (the paper's files sit at
             71..89% of that: its exact target is not documented).

Deterministic in (family, ratio, seed). Writes the CSVs into --out (a temporary folder: never
commit them, and do not copy the trace into the repository).

  python3 src/sim/openb_variants.py --traces ../shared/traces/openb --out /tmp/openb-variants \
      gpushare60 multigpu40 gpuspec33 cpu250
"""

import argparse
import csv
import os
import random
import re
import sys
from collections import defaultdict


def kind(row):
    g, m = int(row["num_gpu"]), int(row["gpu_milli"])
    if g == 0:
        return "cpu"
    if g == 1 and 0 < m < 1000:
        return "share"
    return str(g)


def gpu_milli(row):
    k = kind(row)
    if k == "cpu":
        return 0
    return int(row["gpu_milli"]) if k == "share" else 1000 * int(row["num_gpu"])


def draw(rng, pool, n):
    return [dict(rng.choice(pool)) for _ in range(n)]


def gpushare(rows, p, rng, _):
    cpu = [r for r in rows if kind(r) == "cpu"]
    shared = [r for r in rows if kind(r) == "share"]
    whole = [r for r in rows if kind(r) not in ("cpu", "share")]
    n = len(shared) + len(whole)
    ms = sum(map(gpu_milli, shared)) / len(shared)
    mw = sum(map(gpu_milli, whole)) / len(whole)
    # n_s * ms / (n_s * ms + (n - n_s) * mw) = p
    ns = n if p >= 1 else round(p * n * mw / (ms * (1 - p) + p * mw))
    return cpu + draw(rng, shared, ns) + draw(rng, whole, n - ns)


def multigpu(rows, p, rng, _):
    multi = [r for r in rows if kind(r) in ("2", "4", "8")]
    others = sum(gpu_milli(r) for r in rows if kind(r) not in ("2", "4", "8"))
    out = [dict(r) for r in rows]
    have = sum(map(gpu_milli, multi))
    while have < p / (1 - p) * others:
        r = dict(rng.choice(multi))
        have += gpu_milli(r)
        out.append(r)
    return out


def gpuspec(rows, p, rng, args):
    if not args.spec_from:
        sys.exit("openb_variants: gpuspec needs --spec-from (a pod list with gpu_spec set)")
    specs = defaultdict(list)
    with open(args.spec_from, newline="") as f:
        for r in csv.DictReader(f):
            if r.get("gpu_spec") and kind(r) != "cpu":
                specs[kind(r)].append(r["gpu_spec"])
    out = [dict(r) for r in rows]
    gpu = [r for r in out if kind(r) != "cpu" and specs[kind(r)]]
    for r in rng.sample(gpu, round(p * sum(kind(r) != "cpu" for r in out))):
        r["gpu_spec"] = rng.choice(specs[kind(r)])
    return out


def cpu(rows, p, rng, args):
    with open(args.all_nodes, newline="") as f:
        target = p * sum(int(n["cpu_milli"]) for n in csv.DictReader(f) if int(n["gpu"]) == 0)
    pool = [r for r in rows if kind(r) == "cpu"]
    out = [dict(r) for r in rows if kind(r) != "cpu"]
    have = 0
    while have < target:
        r = dict(rng.choice(pool))
        have += int(r["cpu_milli"])
        out.append(r)
    return out


FAMILIES = {"gpushare": gpushare, "multigpu": multigpu, "gpuspec": gpuspec, "cpu": cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", required=True, help="folder with the openb CSVs")
    ap.add_argument("--out", required=True, help="where to write the variants (a temp folder)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--spec-from", help="pod list whose constraints gpuspec draws from "
                    "(default: TRACES/openb_pod_list_gpuspec20.csv)")
    ap.add_argument("--all-nodes", help="node list with the CPU-only nodes "
                    "(default: TRACES/openb_node_list_all_node.csv)")
    ap.add_argument("variants", nargs="+", help="e.g. gpushare60 multigpu40 gpuspec33 cpu250")
    args = ap.parse_args()
    args.spec_from = args.spec_from or os.path.join(args.traces, "openb_pod_list_gpuspec20.csv")
    args.all_nodes = args.all_nodes or os.path.join(args.traces, "openb_node_list_all_node.csv")
    with open(os.path.join(args.traces, "openb_pod_list_default.csv"), newline="") as f:
        reader = csv.DictReader(f)
        columns, rows = reader.fieldnames, list(reader)
    os.makedirs(args.out, exist_ok=True)
    for v in args.variants:
        m = re.fullmatch(r"(gpushare|multigpu|gpuspec|cpu)(\d+)", v)
        if not m:
            sys.exit(f"openb_variants: bad variant '{v}' (want e.g. gpushare60, cpu250)")
        family, ratio = m.group(1), int(m.group(2)) / 100
        # One stream per variant, so adding a variant to the command changes no other.
        rng = random.Random(f"{args.seed}/{v}")
        out = FAMILIES[family](rows, ratio, rng, args)
        rng.shuffle(out)
        path = os.path.join(args.out, f"openb_pod_list_{v}.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
            w.writeheader()
            for i, r in enumerate(out):
                r["name"] = f"openb-pod-{i:04d}"
                w.writerow(r)
        print(f"{path}: {len(out)} tasks")


if __name__ == "__main__":
    main()
