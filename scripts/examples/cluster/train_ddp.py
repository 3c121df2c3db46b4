#!/usr/bin/env python3
"""Trains from a merged dataset under torchrun: each rank loads only its slice of the rows.

    torchrun --nproc_per_node 8 train_ddp.py /data/emb                  # GPUs (nccl)
    torchrun --nproc_per_node 2 train_ddp.py /data/emb --device cpu     # CPU (gloo)

gpucache.load takes rank and world size from torch.distributed: opening reads manifest.json only,
and each rank maps (and hash-checks) just the shards holding its rows. The model is a toy
(predict whether the first half of an embedding sums to more than the second half); the point is
the data path. Prints one line per rank with the shard files this process has mapped, so a test
can check that ranks map disjoint sets.
"""
import argparse
import os

import torch
import torch.distributed as dist

import gpucache


def mapped_shards():
    """Shard files this process has mapped, from /proc/self/maps (Linux)."""
    names = set()
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.split(maxsplit=5)[-1].strip()
            if path.endswith(".gcs"):
                names.add(os.path.basename(path))
    return sorted(names)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = args.device
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
        torch.cuda.set_device(device)

    data = gpucache.load(args.dataset, device=device, columns=["embedding"])
    print(f"rank {rank}/{world}: rows {data.row_begin}..{data.row_begin + len(data)} "
          f"mapped {','.join(mapped_shards())}", flush=True)

    dim = data.tensors["embedding"].shape[1]
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Linear(dim, 1).to(device), device_ids=None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = gpucache.GPUBatches(data, batch_size=args.batch_size, shuffle=True, seed=rank)
    step = 0
    while step < args.steps:
        for batch in batches:
            x = batch["embedding"].float()
            y = (x[:, : dim // 2].sum(1) > x[:, dim // 2:].sum(1)).float()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step >= args.steps:
                break
    loss = loss.detach().reshape(1)
    dist.all_reduce(loss)
    if rank == 0:
        print(f"mean loss {loss.item() / world:.4f} after {step} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
