"""gpucache.load and the Dataset it returns."""
from __future__ import annotations

import json
import logging
import os
from typing import Dict, List, Optional, Sequence

from . import _arrays, _ranks
from ._gpucache import Error, NativeDataset, is_provenance_column, placements
from ._gpucache import choose_placement as _native_choose_placement
from ._gpucache import placement_margin as _native_placement_margin
from ._sequences import Sequences


_PLACEMENTS = tuple(placements()) + ("auto",)  # the runtime's names, and auto
_READ_MODES = ("auto", "mmap", "pread")


def _check_choice(name: str, value, choices) -> None:
    # Checked whatever the device: with device="cpu" they are unused, but a typo must not pass.
    if value not in choices:
        raise Error(f"{name}={value!r} is not one of {', '.join(choices)}")


def _resolve_device(device):
    """("cpu", None) or ("cuda:N", N). A torch.device is taken by its name."""
    if type(device).__name__ == "device" and type(device).__module__.startswith("torch"):
        device = str(device)
    if not isinstance(device, str):
        raise Error(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, not "
                    f"{type(device).__name__}")
    if device == "cpu":
        return "cpu", None
    if device == "cuda" or device.startswith("cuda:"):
        torch = _arrays.torch
        if torch is None:
            raise Error(f"device='{device}' needs PyTorch; use device='cpu' for numpy arrays")
        if device == "cuda":
            index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        else:
            try:
                index = int(device.split(":", 1)[1])
            except ValueError:
                raise Error(f"device '{device}' is not cpu, cuda or cuda:N") from None
        return f"cuda:{index}", index
    raise Error(f"device '{device}' is not cpu, cuda or cuda:N")


_log = logging.getLogger("gpucache")


def placement_margin(total: int) -> int:
    """VRAM left free by placement="auto": 10% of the card, at least 1 GiB (the runtime's rule,
    runtime.hpp placement_margin)."""
    return _native_placement_margin(total)


def choose_placement(needed: int, free: int, total: int, where: str):
    """placement="auto": ("device", why) when needed + placement_margin(total) <= free, else
    ("host_pinned", why); the runtime's rule (runtime.hpp choose_placement)."""
    return _native_choose_placement(needed, free, total, where)


def device_bytes_needed(native) -> int:
    """An upper bound of the device allocation for the selection, from the runtime
    (Dataset::device_bytes_bound): tensor columns exactly (rows × row pitch, 4096-aligned),
    sequence columns as their offsets plus the needed shards' sizes."""
    return native.device_bytes_bound()


def _manifest_path(path: str) -> str:
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    return os.path.join(folder, "manifest.json")


def _read_manifest(path: str) -> Optional[dict]:
    manifest = _manifest_path(path)
    if not os.path.exists(manifest):
        return None
    try:
        with open(manifest, encoding="utf-8") as file:
            content = json.load(file)
    except (OSError, ValueError) as error:
        raise Error(f"{manifest}: cannot read the manifest: {error}") from None
    # Valid JSON of the wrong shape ("null", a list, shards that are not objects) must not slip
    # past the shard checks or surface as AttributeError.
    shards = content.get("shards") if isinstance(content, dict) else None
    if not isinstance(shards, list) or not all(isinstance(entry, dict) for entry in shards):
        raise Error(f"{manifest}: not a gpucache manifest (expected an object with a list of "
                    "shard objects)")
    return content


class Dataset:
    """A loaded dataset (or this rank's slice of it). Returned by gpucache.load.

    tensors[name]: the LOGICAL [rows, *row_shape] view of each tensor column ([rows] for one
        value per row, [rows, dim] for vectors, [rows, 3, 32, 32] for images), a strided view of
        the padded storage when rows are padded.
    padded[name]: the stored [rows, ..., padded_dim] tensor; embedding rows are zero-padded to a
        tensor-core friendly width, so a GEMM on it equals one on the logical data.
    sequences[name]: each sequence column as a Sequences (values, int64 offsets, batch()).
    texts(name): the rows of a text column as a list of str.
    times: the date and time columns (int64 tensors) and what their integers mean:
        {name: {"kind", "unit", "tz"}}.
    meta: manifest.json as a dict.
    """

    def __init__(self, *, path, native, device, rank, world_size, columns, padded, sequences,
                 host, device_data, shard_views, placement=None, placement_reason="",
                 unshared=None, load_args=None):
        self.path = path
        self._unshared = unshared    # the selection before rank sharing
        self._load_args = load_args  # what loads it again in another process (pickling)
        # Where the data went: "cpu" (mapped), "device" or "host_pinned"; with placement="auto"
        # placement_reason says why (VRAM needed vs free).
        self.placement = placement or ("cpu" if device == "cpu" else "device")
        self.placement_reason = placement_reason
        self.device = device
        self.rank = rank
        self.world_size = world_size
        self.columns: List[dict] = columns
        self.padded: Dict[str, object] = padded
        self.tensors: Dict[str, object] = {
            c["name"]: _arrays.logical_view(padded[c["name"]], c)
            for c in columns if c["kind"] == "tensor"
        }
        self.sequences: Dict[str, Sequences] = sequences
        # Zero-copy per-shard views when the data stayed in the mapping (device="cpu").
        self.shard_views: Dict[str, list] = shard_views
        self._native = native
        self._host = host
        self._device_data = device_data
        self._meta = None
        self._times = None

    def __len__(self) -> int:
        return self._native.rows

    def __getitem__(self, row: int) -> dict:
        """Row `row` as a dict name → value: a [*row_shape] tensor per tensor column, the row's
        values (1-D) per sequence column, a str per text column. With __len__ this makes the
        Dataset a map-style torch dataset: DataLoader(ds, batch_size=..., sampler=...)."""
        rows = len(self)
        if not -rows <= int(row) < rows:
            raise IndexError(f"row {row} of a dataset with {rows} rows")
        row = int(row) % rows
        item = {name: tensor[row] for name, tensor in self.tensors.items()}
        for name, sequence in self.sequences.items():
            item[name] = sequence[row]
        for column in self.columns:
            if column["kind"] == "text":
                item[column["name"]] = self._host.texts(column["name"], [row])[0]
        return item

    def __getitems__(self, rows) -> list:
        """Several rows at once (torch 2.x DataLoader calls this with a batch of indices): each
        tensor column gathered with one index_select, then split into rows."""
        rows = [int(row) for row in rows]
        count = len(self)
        for row in rows:
            if not -count <= row < count:
                raise IndexError(f"row {row} of a dataset with {count} rows")
        rows = [row % count for row in rows]
        items = [dict() for _ in rows]
        if _arrays.backend() == "torch" and rows:
            torch = _arrays.torch
            for name, tensor in self.tensors.items():
                index = torch.as_tensor(rows, dtype=torch.int64, device=tensor.device)
                for item, value in zip(items, tensor.index_select(0, index).unbind(0)):
                    item[name] = value
        else:
            for name, tensor in self.tensors.items():
                for item, row in zip(items, rows):
                    item[name] = tensor[row]
        for name, sequence in self.sequences.items():
            for item, row in zip(items, rows):
                item[name] = sequence[row]
        for column in self.columns:
            if column["kind"] == "text":
                for item, text in zip(items, self._host.texts(column["name"], rows)):
                    item[column["name"]] = text
        return items

    @property
    def row_begin(self) -> int:
        """Index in the whole dataset of this slice's first row."""
        return self._native.row_begin

    @property
    def total_rows(self) -> int:
        """Rows in the whole dataset, before rank slicing and row selection."""
        return self._native.total_rows

    @property
    def meta(self) -> dict:
        if self._meta is None:
            # local_path: the cache folder of a remote dataset (s3://, http(s)://).
            manifest = _read_manifest(self._native.local_path)
            if manifest is None:
                raise Error(f"{_manifest_path(self._native.local_path)}: missing")
            self._meta = manifest
        return self._meta

    @property
    def times(self) -> Dict[str, dict]:
        """The date and time columns among the loaded ones: {name: {"kind", "unit", "tz"}} as the
        manifest records them (kind "timestamp", "date", "time" or "duration"; unit "s", "ms",
        "us", "ns" or "D"; tz a zone name or None). Their tensors are int64 (torch has no
        datetime dtype): numpy.asarray(t).view(f"datetime64[{unit}]") gives numpy's dates, and
        gpucache.export(..., to="npy") writes datetime64/timedelta64 files."""
        if self._times is None:
            loaded = {c["name"] for c in self.columns}
            self._times = {entry["name"]: dict(entry["time"])
                           for entry in self.meta.get("columns", [])
                           if isinstance(entry, dict) and "time" in entry
                           and entry.get("name") in loaded}
        return self._times

    @property
    def nbytes(self) -> int:
        """Bytes of the device (or pinned host) allocation; 0 for device='cpu'."""
        return self._device_data.bytes if self._device_data is not None else 0

    @property
    def load_stats(self) -> dict:
        """What the load did: bytes_copied (0 on the CPU: the tensors are views of the mapping),
        bytes_verified, shards_registered, shards_staged, seconds; the same keys on every
        device."""
        if self._device_data is not None:
            return self._device_data.stats()
        if self._host is not None:
            return self._host.stats()
        return {"bytes_copied": 0, "bytes_verified": 0, "shards_registered": 0,
                "shards_staged": 0, "seconds": 0.0}

    def share_rows(self, rank: int) -> int:
        """Rows of rank `rank`'s share when load split the dataset among world_size ranks (the
        runtime's Dataset::share_for_rank); len(self) for this rank."""
        if self._unshared is None or self.world_size <= 1:
            return len(self)
        return self._unshared.share_for_rank(int(rank), self.world_size).rows

    def __reduce__(self):
        # DataLoader workers started with spawn (or forkserver) get the dataset pickled: they map
        # the same shards again (zero-copy on the CPU). A dataset in VRAM stays in its process.
        if self._load_args is None or self.device != "cpu":
            raise Error(f"a gpucache.Dataset on {self.device} cannot be sent to another process "
                        "(DataLoader workers with spawn): batch it in this process with "
                        "GPUBatches, or load it with device='cpu' for DataLoader workers")
        return (_reload, (self._load_args,))

    def texts(self, name: str, rows: Optional[Sequence[int]] = None) -> List[str]:
        """A text column's rows as str: all of them, or those at the indices `rows` (a list, or a
        tensor such as the indices GPUBatches yields with with_indices=True)."""
        if self._host is None:
            raise Error(f"column '{name}': no text column was selected")
        if rows is None:
            return self._host.texts(name)
        if hasattr(rows, "tolist"):
            rows = rows.tolist()
        return self._host.texts(name, [int(row) for row in rows])

    def mapped_ranges(self) -> List[tuple]:
        """(address, size, path) of every shard mapping this dataset's host views point into."""
        return self._host.mapped_ranges() if self._host is not None else []

    def __repr__(self) -> str:
        names = ", ".join(c["name"] for c in self.columns)
        return (f"gpucache.Dataset({self.path!r}, rows={len(self)}, device={self.device!r}, "
                f"rank={self.rank}/{self.world_size}, columns=[{names}])")


def user_column_names(native) -> List[str]:
    """The dataset's columns without the packer's provenance columns (shown only when asked)."""
    return [c["name"] for c in native.columns() if not is_provenance_column(c["name"])]


def load(path, device: str = "cuda", columns: Optional[Sequence[str]] = None,
         verify: bool = True, rank: Optional[int] = None, world_size: Optional[int] = None,
         *, rows: Optional[tuple] = None, placement: str = "device", read_mode: str = "auto",
         threads: int = 0, cache_dir=None) -> Dataset:
    """Loads a packed dataset directory (or one .gcs shard).

    device: "cuda" (the current CUDA device), "cuda:N", "cpu", or a torch.device of these. On CUDA every selected tensor
        and sequence column lands in one allocation; on the CPU tensors are copy-on-write views
        of the memory-mapped shards, zero-copy even across shards when they were cut on page
        boundaries (as gpucache pack cuts them unless --shard-rows says otherwise). Text columns
        stay in host memory either way.
    columns: names to load (default: every column of the user's data; the packer's provenance
        columns "@source" (int32, the input's index in the manifest's inputs) and "@source_row"
        (int64, the row in that input) only when named here).
    verify: check the XXH3 hash of every chunk read; a mismatch raises gpucache.Error naming the
        shard and byte range. (Each shard's header is always checked against manifest.json, whose
        hash vouches for all of the shard's bytes, when the shard is mapped; opening reads only
        the manifest.)
    rank, world_size: load only this rank's share, contiguous rows, every row kept: the first
        rows % world_size ranks get one row more than rows // world_size. The rank rule
        (docs/python.md "Ranks and workers"): from torch.distributed when it is initialised,
        explicit arguments overriding; rank=0, world_size=1 loads the whole dataset on every
        rank (then GPUBatches splits each epoch among the ranks).
    rows: (begin, end) to load only those rows (before rank slicing).
    placement: "device", or "host_pinned" to keep data in pinned host memory that CUDA kernels
        read over PCIe (for datasets larger than VRAM), or "auto": "device" when the selection
        fits in free VRAM with a margin of 10% of the card (at least 1 GiB), else
        "host_pinned"; ds.placement and ds.placement_reason say which and why (also logged to
        the "gpucache" logger). For batches copied to VRAM as needed, use gpucache.stream.
    read_mode: "auto" (register the mapping as pinned memory, else parallel pread), "mmap" or
        "pread" (for network file systems).
    cache_dir: for a remote dataset (path "s3://BUCKET/PREFIX" or "http(s)://..."), the folder
        its shards are fetched into and reused from (default: GPUCACHE_CACHE, else a temporary
        folder removed with the dataset); docs/python.md "Remote datasets".
    """
    path = os.fspath(path)
    _check_choice("placement", placement, _PLACEMENTS)
    _check_choice("read_mode", read_mode, _READ_MODES)
    load_args = dict(path=path, device=device, columns=None if columns is None else list(columns),
                     verify=verify, rank=rank, world_size=world_size, rows=rows,
                     placement=placement, read_mode=read_mode, threads=threads)
    rank, world_size = _ranks.resolve(rank, world_size)
    load_args.update(rank=rank, world_size=world_size)
    device_name, device_index = _resolve_device(device)
    native = NativeDataset.open(path, "" if cache_dir is None else os.fspath(cache_dir))
    if columns is None:
        columns = user_column_names(native)
    native = native.select_columns(list(columns))
    if rows is not None:
        native = native.select_rows(int(rows[0]), int(rows[1]))
    unshared = native
    native = native.share_for_rank(rank, world_size)
    selected = native.columns()
    tensor_columns = [c for c in selected if c["kind"] == "tensor"]
    sequence_columns = [c for c in selected if c["kind"] == "sequence"]
    text_columns = [c["name"] for c in selected if c["kind"] == "text"]

    padded, sequences, shard_views, host, device_data = {}, {}, {}, None, None
    reason = ""
    if device_index is None:
        placement = "cpu"
    elif placement == "auto":
        torch = _arrays.torch
        if not torch.cuda.is_available():
            raise Error(f"{device_name}: placement='auto' found no usable CUDA GPU (PyTorch "
                        "sees none: no NVIDIA driver, or no GPU); load with device='cpu'")
        free, total = torch.cuda.mem_get_info(device_index)
        placement, reason = choose_placement(device_bytes_needed(native), free, total,
                                             device_name)
        _log.info("gpucache.load(%s): %s", path, reason)
    flags = _arrays.wire_flags()
    if device_index is None:
        host = native.to_host(verify=verify, threads=threads)
        for column in tensor_columns:
            views = [_arrays.from_native(piece, column)
                     for piece in host.pieces(column["name"], **flags)]
            shard_views[column["name"]] = views
            if not views:
                padded[column["name"]] = _arrays.empty(column, "cpu")
                continue
            joined = host.joined(column["name"], **flags)
            if joined is not None:  # one shard, or shards mapped side by side: no copy
                padded[column["name"]] = _arrays.from_native(joined, column)
            else:  # shards whose parts do not meet on page boundaries: one copy joins them
                padded[column["name"]] = _arrays.concatenate(views)
        for column in sequence_columns:
            values, offsets = host.sequence(column["name"], **flags)
            sequences[column["name"]] = _sequences_of(column, values, offsets)
    else:
        uploaded_columns = tensor_columns + sequence_columns
        if uploaded_columns:
            uploaded = native.select_columns([c["name"] for c in uploaded_columns])
            device_data = uploaded.to_device(device_index, placement=placement,
                                             read_mode=read_mode, verify=verify,
                                             threads=threads)
            for column in tensor_columns:
                if native.rows == 0:
                    padded[column["name"]] = _arrays.empty(column, device_name)
                    continue
                array = device_data.tensor(column["name"], **flags)
                padded[column["name"]] = _arrays.from_native(array, column)
            for column in sequence_columns:
                values, offsets = device_data.sequence(column["name"], **flags)
                sequences[column["name"]] = _sequences_of(column, values, offsets)
        if text_columns:
            host = native.select_columns(text_columns).to_host(verify=verify, threads=threads)
    return Dataset(path=path, native=native, device=device_name, rank=rank,
                   world_size=world_size, columns=selected, padded=padded, sequences=sequences,
                   host=host, device_data=device_data, shard_views=shard_views,
                   placement=placement, placement_reason=reason, unshared=unshared,
                   load_args=load_args)


def _reload(load_args: dict) -> Dataset:
    return load(**load_args)


_OFFSETS = {"dtype": "i64"}


def _sequences_of(column: dict, values, offsets) -> Sequences:
    return Sequences(column["name"], _arrays.from_native(values, column),
                     _arrays.from_native(offsets, _OFFSETS))
