#!/usr/bin/env python3
"""How much of the requests the slots a rebalancer moved really carried, against its plan.

For every step of every `runs/ARM-rK-rebalance.log` of a `cargo xtask live` output folder
whose plan logged its groups' per-slot loads (`plan.summary[].load`, ach-redis since commit
f793491), and every master the plan relieved by more than 0.002 (load moved out less load moved
in), this compares two fractions of the master's load:

- *planned*: the load the plan moved out of it, net, over its load at the step (both the
  loop's own figures, from the log);
- *true*: the workload's request share of the slots moved out of it, net, over the share of
  all the slots it owned at the step. A slot's share is the sum of its keys' shares as the
  clients draw them (ach-live's `workload.rs`: client `c` owns keys `i % clients == c` and draws
  Zipf 1.0 over them by rank); its slot is CRC16 of `k:i`. The owners start as each master's
  `initial_slots` (`runs/ARM-rK.json`) and follow the logged moves. Steps within two of the
  hot-key phase (a quarter to a half of the run) are left out, as its hot keys change the
  shares.

It prints, per run, the quartiles of true over planned (1: the plan moved what it said).

    python3 scripts/live/moved_slot_shares.py OUT_DIR [ARM]    # ARM: ACH by default
"""

import glob
import json
import statistics
import sys

SLOTS = 16384


def crc16(data):
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def slot_shares(keys, clients):
    """Each slot's share of the requests outside the hot-key phase (Zipf 1.0 per client)."""
    owned = [(keys + clients - 1 - c) // clients for c in range(clients)]
    harmonic = [sum(1 / r for r in range(1, owned[c] + 1)) for c in range(clients)]
    share = [0.0] * SLOTS
    for key in range(keys):
        client, rank = key % clients, key // clients + 1
        share[crc16(f"k:{key}".encode()) % SLOTS] += 1 / (clients * rank * harmonic[client])
    return share


def net_by_master(pairs):
    net = {}
    for source, target, amount in pairs:
        net[source] = net.get(source, 0.0) + amount
        net[target] = net.get(target, 0.0) - amount
    return net


def ratios_of_run(log_path, share, hot_steps):
    run = json.load(open(log_path.replace("-rebalance.log", ".json")))
    owner = [None] * SLOTS
    for node in run["nodes"]:
        first, last = node["initial_slots"]
        for slot in range(first, last + 1):
            owner[slot] = node["address"]
    ratios = []
    for line in open(log_path):
        step = json.loads(line)
        if step.get("event") != "step" or "observed" not in step:
            continue
        plan = step.get("plan") or {}
        moves = plan.get("moves") or []
        groups = [g for g in plan.get("summary") or [] if g.get("load") is not None]
        if groups and step["step"] not in hot_steps:
            loads = {n["address"]: n["load"] for n in step["observed"]["nodes"]}
            held = {}
            for slot, address in enumerate(owner):
                held[address] = held.get(address, 0.0) + share[slot]
            planned = net_by_master((g["from"], g["to"], g["load"]) for g in groups)
            true = net_by_master((m["from"], m["to"], share[m["slot"]]) for m in moves)
            for master, load in planned.items():
                if load > 0.002 and loads.get(master, 0) > 0 and held.get(master, 0) > 0:
                    ratios.append((true.get(master, 0.0) / held[master]) / (load / loads[master]))
        for move in moves:
            owner[move["slot"]] = move["to"]
    return ratios


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out, arm = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "ACH")
    config = json.load(open(f"{out}/summary.json"))["config"]
    share = slot_shares(config["keys"], config["clients"])
    duration = config["duration_s"]
    hot_steps = range(int(0.25 * duration) - 2, int(0.5 * duration) + 3)
    every = []
    for log_path in sorted(glob.glob(f"{out}/runs/{arm}-r*-rebalance.log")):
        ratios = ratios_of_run(log_path, share, hot_steps)
        every += ratios
        name = log_path.split("/")[-1].removesuffix("-rebalance.log")
        if len(ratios) >= 4:
            quartiles = ", ".join(f"{q:.2f}" for q in statistics.quantiles(ratios, n=4))
            print(f"{name}: {len(ratios)} relieved masters, true over planned quartiles {quartiles}")
        else:
            print(f"{name}: {len(ratios)} relieved masters (too few for quartiles)")
    if every:
        print(f"all: {len(every)}, median {statistics.median(every):.2f}")


if __name__ == "__main__":
    main()
