"""Batches as torch users expect them: DataLoader workers (fork and spawn, persistent or not) share
a stream's or a Dataset's epoch, every row exactly once; the one rank rule across load, stream
and GPUBatches under two gloo processes; mismatched rank combinations raise; the defaults lose no
row; transform=. Every run in a child process has a timeout, so a hang fails the test."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader

import gpucache

ROWS = ["embedding", "@source_row"]  # the provenance column is read only when named

TIMEOUT = 180  # seconds for any child process; a hang fails instead of blocking CI


def run_child(code: str, *args, timeout=TIMEOUT):
    """Runs `code` in a fresh interpreter (DataLoader workers are only safe to test where a hang
    can be killed) and returns its JSON output."""
    try:
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                                capture_output=True, text=True, timeout=timeout,
                                env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"hung for {timeout} s: {expired.stderr}")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


LOADER = """
import json, sys, torch
from torch.utils.data import DataLoader
import gpucache
path, method, configurations = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
results = []
for kind, workers, persistent in configurations:
    if kind == "stream":
        data = gpucache.stream(path, device="cpu", batch_size=8, seed=1, columns=["@source_row"])
        options = dict(batch_size=None)
    else:
        data = gpucache.load(path, device="cpu", columns=["@source_row"])
        options = dict(batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
    if workers:
        options.update(num_workers=workers, multiprocessing_context=method,
                       persistent_workers=persistent)
    loader = DataLoader(data, **options)
    epochs = []
    for epoch in range(2):
        if kind == "stream":
            data.set_epoch(epoch)
        epochs.append([r for b in loader for r in b["@source_row"].tolist()])
    results.append(epochs)
print(json.dumps(results))
"""

# One interpreter per start method runs every configuration (each start of torch costs seconds).
CONFIGURATIONS = {
    "fork": [[kind, workers, persistent] for kind in ("stream", "dataset")
             for workers, persistent in ((0, False), (2, False), (4, True))],
    "spawn": [["stream", 2, True], ["dataset", 2, True]],  # fork covers non-persistent
}


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_yield_every_row_once_per_epoch(packed, method):
    configurations = CONFIGURATIONS[method]
    results = run_child(LOADER, packed, method, json.dumps(configurations))
    alone = gpucache.stream(packed, device="cpu", batch_size=8, seed=1, columns=["@source_row"])
    order = [[r for b in alone for r in b["@source_row"].tolist()] for _ in range(2)]
    for (kind, workers, persistent), epochs in zip(configurations, results):
        for rows in epochs:
            assert sorted(rows) == list(range(103)), (kind, workers, persistent)
        if kind == "stream":  # the workers' batches come in the epoch's order, as without them
            assert epochs == order, (workers, persistent)


def test_ranks_times_workers_cover_every_row_once(packed):
    per_rank = run_child("""
        import json, sys
        from torch.utils.data import DataLoader
        import gpucache
        out = []
        for rank in range(2):
            s = gpucache.stream(sys.argv[1], device="cpu", batch_size=8, seed=4, rank=rank,
                                world_size=2, columns=["@source_row"])
            loader = DataLoader(s, batch_size=None, num_workers=2)
            out.append([r for b in loader for r in b["@source_row"].tolist()])
        print(json.dumps(out))
    """, packed)
    assert not set(per_rank[0]) & set(per_rank[1])
    assert sorted(per_rank[0] + per_rank[1]) == list(range(103))


def test_a_stream_opened_in_the_parent_runs_in_forked_workers(packed):
    """The parent iterates first (its reader threads run), then forked workers iterate: they
    open their own readers instead of waiting on threads that stayed in the parent."""
    rows = run_child("""
        import json, sys
        from torch.utils.data import DataLoader
        import gpucache
        s = gpucache.stream(sys.argv[1], device="cpu", batch_size=8, seed=1, prefetch=2, columns=["embedding", "@source_row"])
        first = next(iter(s))
        loader = DataLoader(s, batch_size=None, num_workers=2, multiprocessing_context="fork")
        print(json.dumps([r for b in loader for r in b["@source_row"].tolist()]))
    """, packed)
    assert sorted(rows) == list(range(103))


def test_stream_state_in_a_worker_names_the_worker(packed):
    states = run_child("""
        import json, sys
        from torch.utils.data import DataLoader, IterableDataset
        import gpucache
        s = gpucache.stream(sys.argv[1], device="cpu", batch_size=8, seed=1, columns=["embedding", "@source_row"])
        class Report(IterableDataset):  # yields the worker's state after each batch
            def __iter__(self):
                for batch in s:
                    yield s.state_dict()
        states = list(DataLoader(Report(), batch_size=None, num_workers=2))
        print(json.dumps(states))
    """, packed)
    assert [(st["worker"], st["workers"], st["batch"]) for st in states[:4]] == [
        (0, 2, 2), (1, 2, 3), (0, 2, 4), (1, 2, 5)]
    s = gpucache.stream(packed, device="cpu", batch_size=8, seed=1, columns=ROWS)
    with pytest.raises(gpucache.Error, match="worker 1's of 2"):
        s.load_state_dict(states[1])


DDP = """
import json, sys
import torch.distributed as dist
import gpucache
path, init, rank, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
rows = lambda batches: [r for b in batches for r in b["@source_row"].tolist()]
seen = {}
ds = gpucache.load(path, device="cpu", columns=["embedding", "@source_row"])                      # this rank's share
seen["load+GPUBatches"] = rows(gpucache.GPUBatches(ds, batch_size=8, seed=0))
whole = gpucache.load(path, device="cpu", rank=0, world_size=1, columns=["embedding", "@source_row"])
seen["whole+GPUBatches"] = rows(gpucache.GPUBatches(whole, batch_size=8, seed=0))
seen["stream"] = rows(gpucache.stream(path, device="cpu", batch_size=8, seed=0, columns=["embedding", "@source_row"]))
try:
    gpucache.GPUBatches(ds, batch_size=8, rank=rank, world_size=2)
    seen["mismatch"] = ""
except gpucache.Error as error:
    seen["mismatch"] = str(error)
dist.barrier()
json.dump(seen, open(out, "w"))
"""


def test_two_gloo_ranks_with_the_defaults_see_disjoint_rows_covering_the_dataset(packed,
                                                                                  tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(DDP)
    init = f"file://{tmp_path / 'rendezvous'}"
    outs = [tmp_path / f"rank{r}.json" for r in range(2)]
    procs = [subprocess.Popen([sys.executable, str(script), str(packed), init, str(r),
                               str(outs[r])], env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
             for r in range(2)]
    try:
        for proc in procs:
            assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        for proc in procs:
            proc.kill()
    seen = [json.loads(out.read_text()) for out in outs]
    for way in ("load+GPUBatches", "whole+GPUBatches", "stream"):
        first, second = seen[0][way], seen[1][way]
        assert not set(first) & set(second), way
        assert sorted(first + second) == list(range(103)), way
    assert "only 1/2 of its rows" in seen[0]["mismatch"]


def test_mismatched_rank_combinations_raise(packed):
    share = gpucache.load(packed, device="cpu", rank=1, world_size=2, columns=ROWS)
    assert len(share) == 51 and share.share_rows(0) == 52
    with pytest.raises(gpucache.Error, match="already rank 1's share of world_size 2"):
        gpucache.GPUBatches(share, batch_size=8, rank=1, world_size=2)
    with pytest.raises(gpucache.Error, match="pass neither"):
        gpucache.GPUBatches(share, batch_size=8, rank=1, world_size=1)
    with pytest.raises(gpucache.Error, match="rank and world_size go together"):
        gpucache.stream(packed, device="cpu", rank=1, columns=ROWS)
    # 103 rows over 2 ranks: 52 and 51, in batches of 51 would be 2 batches and 1: DDP would hang.
    with pytest.raises(gpucache.Error, match="ranks would get 2 and 1 batches.*drop_last=True"):
        gpucache.stream(packed, device="cpu", batch_size=51, rank=0, world_size=2, columns=ROWS)
    with pytest.raises(gpucache.Error, match="ranks would get 2 and 1 batches"):
        gpucache.GPUBatches(gpucache.load(packed, device="cpu", columns=ROWS), batch_size=51, rank=0,
                            world_size=2)
    with pytest.raises(gpucache.Error, match="ranks would get 2 and 1 batches"):
        gpucache.GPUBatches(share, batch_size=51)
    assert len(gpucache.GPUBatches(share, batch_size=51, drop_last=True)) == 1


def test_shares_of_load_cover_every_row_once(packed):
    shares = [gpucache.load(packed, device="cpu", rank=r, world_size=3, columns=ROWS) for r in range(3)]
    assert [len(s) for s in shares] == [35, 34, 34]
    rows = [r for s in shares for r in s.tensors["@source_row"].tolist()]
    assert rows == list(range(103))


def test_default_loops_see_every_row(packed):
    ds = gpucache.load(packed, device="cpu", columns=ROWS)
    rows = [r for b in gpucache.GPUBatches(ds, batch_size=10) for r in b["@source_row"].tolist()]
    assert sorted(rows) == list(range(103))   # 103 is no multiple of 10: the short batch too
    evaluation = gpucache.GPUBatches(ds, batch_size=10, shuffle=False)
    assert [r for b in evaluation for r in b["@source_row"].tolist()] == list(range(103))
    streamed = gpucache.stream(packed, device="cpu", batch_size=10, columns=ROWS)
    assert sorted(r for b in streamed for r in b["@source_row"].tolist()) == list(range(103))


def test_transform_runs_on_each_batch_and_leaves_the_state_alone(packed):
    ds = gpucache.load(packed, device="cpu", columns=ROWS)

    def normalise(batch):
        return {"x": (batch["embedding"] - 0.5).to(torch.bfloat16), "row": batch["@source_row"]}

    plain = list(gpucache.GPUBatches(ds, batch_size=16, seed=3))
    mapped = gpucache.GPUBatches(ds, batch_size=16, seed=3, transform=normalise)
    streamed = gpucache.stream(packed, device="cpu", batch_size=16, seed=3, transform=normalise, columns=ROWS)
    for got in (list(mapped), list(streamed)):
        for batch, want in zip(got, plain):
            assert set(batch) == {"x", "row"} and batch["x"].dtype == torch.bfloat16
            assert torch.equal(batch["x"], (want["embedding"] - 0.5).to(torch.bfloat16))
            assert torch.equal(batch["row"], want["@source_row"])
    resumed = gpucache.GPUBatches(ds, batch_size=16, seed=3, transform=normalise)
    iterator = iter(resumed)
    next(iterator)
    assert resumed.state_dict() == (lambda b: (next(iter(b)), b.state_dict())[1])(
        gpucache.GPUBatches(ds, batch_size=16, seed=3))
    with pytest.raises(gpucache.Error, match="transform must be callable"):
        gpucache.GPUBatches(ds, batch_size=16, transform=3)


def test_load_stats_on_the_cpu(packed):
    stats = gpucache.load(packed, device="cpu", columns=ROWS).load_stats
    assert set(stats) == {"bytes_copied", "bytes_verified", "shards_registered",
                          "shards_staged", "seconds"}
    assert stats["bytes_copied"] == 0 and stats["bytes_verified"] > 0 and stats["seconds"] >= 0
    assert gpucache.load(packed, device="cpu", verify=False, columns=ROWS).load_stats["bytes_verified"] == 0


def test_a_cpu_dataset_pickles_by_loading_again(packed):
    import pickle
    ds = gpucache.load(packed, device="cpu", columns=["@source_row"], rank=1, world_size=2)
    again = pickle.loads(pickle.dumps(ds))
    assert torch.equal(again.tensors["@source_row"], ds.tensors["@source_row"])
    assert (again.rank, again.world_size) == (1, 2)


@pytest.mark.skipif(not torch.cuda.is_available() or not gpucache.cuda_available(),
                    reason="needs a CUDA GPU")
def test_transform_on_the_gpu_adds_no_host_synchronisation(packed):
    ds = gpucache.load(packed, device="cuda", columns=ROWS)
    mean = torch.full((1, 10), 0.5, device="cuda")

    def normalise(batch):
        return {"x": ((batch["embedding"] - mean) * 2).to(torch.bfloat16)}

    batches = gpucache.GPUBatches(ds, batch_size=8, seed=1, transform=normalise)
    iterator = iter(batches)
    first = next(iterator)  # the epoch's order is copied to the GPU once, here
    assert first["x"].device.type == "cuda" and first["x"].dtype == torch.bfloat16
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call now raises
    try:
        rest = [batch["x"] for batch in iterator]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert sum(len(x) for x in rest) + len(first["x"]) == 103
