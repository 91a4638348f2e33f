"""The training program of the torch cases, at /opt/train/train_torch.py in every pod.

Started by torchrun (which sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK from its rendezvous)
or straight from the pod's env (Volcano's convention): either way init_process_group reads env://.
It all_reduces rank + 1 over gloo on the CPU and prints one E2E-RESULT line for the harness.
"""
import json
import socket

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([rank + 1])
    dist.all_reduce(total)
    result = {"rank": rank, "world": world, "host": socket.gethostname(), "sum": int(total.item())}
    print("E2E-RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
