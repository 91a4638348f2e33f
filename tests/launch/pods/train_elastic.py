"""The training program of the scenarios (launch.py's `scenario:` cases), at
/opt/train/train_elastic.py in every pod: a worker that trains until it is told to stop.

Started by torchrun, which sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK from its rendezvous,
anew for each (re)start of the workers. Every half second it all_reduces [rank + 1, stop] over
gloo on the CPU and prints one E2E-RESULT line (rank, world, host, the sum, the round since this
start, the rendezvous's master, the time); `stop` is 1 on a rank that sees the stop file
/opt/train/STOP (the harness writes it into the pods' image directory), so every rank learns it in
the same round and they all leave together: exit 0, and torchrun's agent exits 0 after them.
A peer that dies makes the all_reduce raise: this worker exits non-zero and the agent restarts the
workers at a new rendezvous (within PET_MAX_RESTARTS).
"""
import json
import os
import socket
import time

import torch
import torch.distributed as dist

STOP_FILE = "/opt/train/STOP"
INTERVAL = 0.5


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    master = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    number = 0
    while True:
        values = torch.tensor([rank + 1, 1 if os.path.exists(STOP_FILE) else 0])
        dist.all_reduce(values)
        stop = int(values[1].item()) > 0
        result = {"rank": rank, "world": world, "host": socket.gethostname(),
                  "sum": int(values[0].item()), "round": number, "restart": restart,
                  "master": master, "t": time.time(), "stop": stop}
        print("E2E-RESULT " + json.dumps(result), flush=True)
        if stop:
            break
        number += 1
        time.sleep(INTERVAL)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
