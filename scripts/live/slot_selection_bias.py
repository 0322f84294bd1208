#!/usr/bin/env python3
"""How much the planner's choice of slots inflates their per-slot reading (a model).

The live workload (ach-live's `workload.rs`): 100 000 keys, 4 clients, each drawing Zipf 1.0
over its own keys by rank; here the keys fall into 16 384 slots at random (not by CRC16), and one
master owns a sixth of the slots. In one interval of `seconds`, a slot's reading is a Poisson
count with the slot's true rate as mean. The master's own load is taken as known, split among its
slots by their counts, as `ach-redis` splits it. ACH's planner (`plan_by_token_load`) ranks a
source's slots by load per key, highest first, and takes them until they carry `fraction` of the
master's load. Printed: the median, over `trials` intervals, of the true load of the slots taken
over the load their readings said they carry (1.0: no bias; below 1: the readings overstate).

Standard library only: `python3 scripts/live/slot_selection_bias.py`.
"""

import math
import random
import statistics

KEYS, SLOTS, CLIENTS = 100_000, 16_384, 4


def poisson(rng, mean):
    """Knuth's method for small means, a rounded normal above 30."""
    if mean > 30:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def master_slots(rng):
    """The true request share and the keys of each slot of one master (a sixth of the slots)."""
    harmonic = sum(1 / r for r in range(1, KEYS // CLIENTS + 1))
    share = [0.0] * SLOTS
    keys = [0] * SLOTS
    for key in range(KEYS):
        rank = key // CLIENTS + 1
        slot = rng.randrange(SLOTS)
        share[slot] += 1 / (rank * harmonic * CLIENTS)
        keys[slot] += 1
    owned = range(SLOTS // 6)
    return [share[s] for s in owned], [keys[s] for s in owned]


def trial(rng, share, keys, rate, seconds, fraction):
    true = [s * rate for s in share]
    counts = [poisson(rng, t * seconds) for t in true]
    total_true, total_count = sum(true), sum(counts)
    if total_count == 0:
        return float("nan")
    estimate = [total_true * c / total_count for c in counts]
    order = sorted(
        (s for s in range(len(keys)) if keys[s] > 0 and estimate[s] > 0),
        key=lambda s: (-estimate[s] / keys[s], s),
    )
    said = taken_true = 0.0
    for s in order:
        if said >= fraction * total_true:
            break
        said += estimate[s]
        taken_true += true[s]
    return taken_true / said


def main():
    rng = random.Random(1)
    share, keys = master_slots(rng)
    trials = 30
    print("rate (requests/s, all masters)  fraction of the master's load taken  true / read (median)")
    for rate in (1500, 3300, 6000, 13200):
        for fraction in (0.01, 0.05, 0.2):
            ratios = [trial(rng, share, keys, rate, 1.0, fraction) for _ in range(trials)]
            print(f"{rate:>31}  {fraction:>36}  {statistics.median(ratios):>20.3f}")


if __name__ == "__main__":
    main()
