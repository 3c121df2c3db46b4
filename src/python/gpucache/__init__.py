"""gpucache: pack, verify and load verified, GPU-ready datasets.

    import gpucache
    gpucache.pack({"embedding": vectors}, "data/emb", dtype="f16")   # or files, tables
    ds = gpucache.load("data/emb", device="cuda")      # every column in VRAM, hash-checked
    for batch in gpucache.GPUBatches(ds, batch_size=1024, seed=0):
        loss = model(batch["embedding"])
    for batch in gpucache.stream("data/big", device="cuda", batch_size=1024, seed=0):
        ...                                             # larger than VRAM: read as needed

See docs/python.md for the full API, lifetimes, rank slicing and errors.
"""
from ._gpucache import Error, cuda_available, cuda_library
from ._batches import GPUBatches
from ._cli import cli_path
from ._columns import TimeColumn, VarColumn
from ._dataset import Dataset, load
from ._sequences import PaddedBatch, Sequences, pad_sequences
from ._stream import Stream, stream
from ._tools import export, inspect, merge, pack, probe, push, verify

Error.__module__ = "gpucache"
Error.__doc__ = ("Raised for every gpucache failure; the message names the file, where in it "
                 "and what is wrong, also found in the attributes file, location and cause "
                 "(None where not known). A subclass of RuntimeError.")

__version__ = "0.1.0"
__all__ = ["Dataset", "Error", "GPUBatches", "PaddedBatch", "Sequences", "Stream", "TimeColumn",
           "VarColumn",
           "cli_path", "cuda_available", "cuda_library", "export", "inspect", "load", "merge",
           "pack", "pad_sequences", "probe", "push", "stream", "verify"]
