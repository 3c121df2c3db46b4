#!/usr/bin/env python3
"""Trains a tiny model from a packed dataset with gpucache.GPUBatches.

    gpucache pack emb.npy -o data/emb
    python examples/train_loop.py data/emb
    torchrun --nproc-per-node 2 examples/train_loop.py data/emb   # each rank loads its slice

The whole dataset is loaded (and hash-checked) onto the GPU once; every batch is then a gather on
the device, with no host work and no synchronisation per step. Runs on the CPU when there is no
GPU. Without a path, it packs a small synthetic dataset first with the gpucache command that pip
installed with the package (`python -m gpucache pack ...`: no PATH or build folder needed;
$GPUCACHE_CLI names another one), so it runs from any directory.

The task is made up: predict whether an embedding's first half sums to more than its second half.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy
import torch

import gpucache


def demo_dataset(folder: pathlib.Path) -> pathlib.Path:
    embeddings = numpy.random.default_rng(0).standard_normal((4096, 96)).astype(numpy.float32)
    numpy.save(folder / "emb.npy", embeddings)
    subprocess.run([sys.executable, "-m", "gpucache", "pack", str(folder / "emb.npy"), "-o",
                    str(folder / "ds"),
                    "--dtype", "f16", "--shard-rows", "1000", "--quiet"], check=True,
                   capture_output=True)
    return folder / "ds"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", help="packed dataset directory")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    if "RANK" in os.environ and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    device = "cuda" if torch.cuda.is_available() else "cpu"

    with tempfile.TemporaryDirectory() as scratch:
        path = args.dataset or demo_dataset(pathlib.Path(scratch))
        # rank/world_size come from torch.distributed when it is initialised.
        ds = gpucache.load(path, device=device, columns=["embedding"])
        size = sum(t.numel() * t.element_size() for t in ds.padded.values())
        print(f"loaded {ds}: {size / 2**20:.1f} MiB on {ds.device}")

        dim = ds.tensors["embedding"].shape[1]
        padded_dim = ds.padded["embedding"].shape[1]
        # The padded rows feed the GEMM directly: their zero padding leaves the result unchanged.
        model = torch.nn.Sequential(torch.nn.Linear(padded_dim, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 1)).to(ds.device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        batches = gpucache.GPUBatches(ds, batch_size=args.batch_size, seed=0, padded=True)
        for epoch in range(args.epochs):
            batches.set_epoch(epoch)
            total = torch.zeros((), device=ds.device)  # summed on the device: no sync per step
            for batch in batches:
                x = batch["embedding"].float()
                label = (x[:, : dim // 2].sum(1) > x[:, dim // 2: dim].sum(1)).float()
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    model(x).squeeze(1), label)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += loss.detach()
            print(f"epoch {epoch}: mean loss {total.item() / len(batches):.4f}")


if __name__ == "__main__":
    main()
