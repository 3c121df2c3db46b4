"""gpucache.pack, verify, inspect, probe and export: the CLI's commands as Python functions over
the same C++ library. Each returns what the command's --json prints, as a dict (probe of several
files: a list of them), and raises gpucache.Error where the command exits 2."""
from __future__ import annotations

import json
import numbers
import os
import warnings
from typing import Callable, Optional, Sequence, Union

from . import _gpucache
from ._gpucache import Error
from ._memory import host_leaf, leaf_description, memory_columns

ProgressArg = Union[bool, Callable[[int, int], None], None]

# The library's own list (its input registry), so Python recognises the Parquet files it reads.
_PARQUET_SUFFIXES = tuple(_gpucache.input_format_suffixes()["parquet"])
_TABLE_SUFFIXES = _PARQUET_SUFFIXES + (".arrow", ".feather")


def _pairs(value, option: str) -> list:
    """COLUMN=VALUE texts from a dict, one such text, or a list of them (as the CLI repeats a
    flag)."""
    if value is None:
        return []
    if isinstance(value, dict):
        # The texts split at their first '=' (docs/cli.md "Names are the user's"): a column name
        # holding one would be read as another name and path.
        for key in value:
            if "=" in str(key):
                raise Error(f"{option}: column name {str(key)!r} holds '=', which the NAME=VALUE "
                            "form cannot carry; give the column a name without '='")
        return [f"{key}={item}" for key, item in value.items()]
    if isinstance(value, str):
        return [value]
    try:
        return [str(item) for item in value]
    except TypeError:
        raise Error(f"{option} must be a dict, a str or a list of str") from None


def _split_text(value) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        return ",".join(f"{name}={fraction}" for name, fraction in value.items())
    raise Error("split must be a dict {name: fraction} or 'train=0.9,val=0.1'")


def _compress_text(value) -> Optional[str]:
    if value is None or value is False:
        return None
    if value is True:
        return "zstd"
    if isinstance(value, int):
        if value == 0:
            return "none"
        return f"zstd:{value}"
    return str(value)


def _is_table(value) -> bool:
    module = type(value).__module__ or ""
    return module.split(".")[0] in ("pyarrow", "datasets", "pandas", "polars")


def _is_table_path(value) -> bool:
    return isinstance(value, (str, os.PathLike)) and os.fspath(value).lower().endswith(
        _TABLE_SUFFIXES)


def _native_parquet() -> bool:
    """True when the C++ library reads Parquet itself (built with libsnappy): then .parquet
    files are packed as files, like the CLI does, and pyarrow is not needed."""
    return "parquet" in _gpucache.built_input_formats()


def _parquet_files(value) -> Optional[list]:
    """The Parquet files a path names: itself, or a folder's *.parquet files in name order
    (as a Hugging Face dataset's shards, or Spark's part files, lie). None for anything else."""
    if not isinstance(value, (str, os.PathLike)):
        return None
    path = os.fspath(value)
    if path.lower().endswith(_PARQUET_SUFFIXES):
        return [path]
    if os.path.isdir(path):
        files = sorted(os.path.join(folder, name) for folder, _, names in os.walk(path)
                       for name in names if name.lower().endswith(_PARQUET_SUFFIXES))
        return files or None
    return None


def _table_columns(source) -> dict:
    try:
        from ._arrow import table_columns
    except ImportError as error:
        raise Error(f"packing {type(source).__name__} needs pyarrow and gpucache's Arrow "
                    f"support ({error})") from None
    if (type(source).__module__ or "").startswith("pandas"):
        try:
            import pyarrow
        except ImportError:
            raise Error("packing a pandas DataFrame needs pyarrow") from None
        source = pyarrow.Table.from_pandas(source, preserve_index=False)
    return table_columns(source)


class Input:
    """One input of a mixed project, with its own mapping to the dataset's columns:
    pack([Input("dialogue.pt", fields={"embedding": "[*].q_embedding", "text": "[*].question"}),
    Input("vectors.pt", fields={"embedding": "."}), Input("llm_cache.pt")], out). fields
    ({column: path}), kind and roles ({column: role}) mean what pack()'s keywords of those names
    mean, for this input alone; a file may be listed twice with two mappings (a dialogue file's
    questions, then its answers). fill ({column: text}) gives a text column this input lacks the
    same text in every row (a plain embedding matrix beside inputs with text). Inputs whose
    columns do not line up are refused, naming the input, the column it lacks and what to pass. The CLI's form is pack --input-map (docs/cli.md,
    "Mixed projects")."""

    def __init__(self, path, *, fields=None, kind: Optional[str] = None, roles=None,
                 fill=None):
        self.path = os.fspath(path)
        self.fields = _column_dict(fields, "fields")
        self.kind = kind
        self.roles = _column_dict(roles, "roles")
        self.fill = _column_dict(fill, "fill")

    def __repr__(self) -> str:
        return (f"gpucache.Input({self.path!r}, fields={self.fields!r}, kind={self.kind!r}, "
                f"roles={self.roles!r}, fill={self.fill!r})")

    def entry(self) -> dict:
        """This input as an entry of the --input-map JSON."""
        entry = {"path": os.path.abspath(self.path)}
        if self.kind is not None:
            entry["kind"] = self.kind
        if self.fields:
            entry["fields"] = self.fields
        if self.roles:
            entry["roles"] = self.roles
        if self.fill:
            entry["fill"] = self.fill
        return entry


def _column_dict(value, option: str) -> dict:
    """{column: text} from a dict, or from COLUMN=TEXT texts as pack()'s keywords take them."""
    pairs = {}
    for text in _pairs(value, option):
        column, equals, item = text.partition("=")
        if not equals:
            raise Error(f"Input {option}: {text!r} is not COLUMN=VALUE; pass a dict "
                        "{column: value}")
        pairs[column] = item
    return pairs


def _is_input_list(inputs) -> bool:
    return isinstance(inputs, (list, tuple)) and any(isinstance(item, Input) for item in inputs)


def _is_dict_list(inputs) -> bool:
    return (isinstance(inputs, (list, tuple)) and len(inputs) > 0
            and all(isinstance(item, dict) for item in inputs))


def _sources(inputs, kind=None):
    """(input files, columns in memory, object tree in memory, input map). A list of dicts is an
    object tree, packed as the same list saved in a .pt is; a dict is an LLM cache when the
    library's rule says the .pt reader reads that dict so (gpucache/schema.hpp
    memory_dict_is_llm_cache; kind="tensors" keeps its values as columns), else a dict of
    columns; a list with gpucache.Input entries is a mixed project."""
    if isinstance(inputs, Input):
        inputs = [inputs]
    if isinstance(inputs, dict):
        if kind != "tensors" and _gpucache.memory_dict_is_llm_cache(inputs, leaf_description):
            return [], [], inputs, None
        return [], memory_columns(inputs), None, None
    if _is_dict_list(inputs):
        return [], [], list(inputs), None
    if _is_input_list(inputs):
        entries = [(item if isinstance(item, Input) else Input(item)).entry() for item in inputs]
        return [], [], None, json.dumps({"inputs": entries})
    return _file_sources(inputs) + (None, None)


def _file_sources(inputs):
    """(input files, columns in memory) of files and tables."""
    parquet = _parquet_files(inputs)
    if parquet and _native_parquet():
        return parquet, []
    if _is_table(inputs) or _is_table_path(inputs) or parquet:
        return [], memory_columns(_table_columns(inputs))
    if isinstance(inputs, (str, os.PathLike)):
        return [os.fspath(inputs)], []
    try:
        files = [os.fspath(item) for item in inputs]
    except TypeError:
        raise Error(f"pack() inputs must be files, gpucache.Input entries, a dict (of columns, "
                    f"or an LLM cache), a list of dicts, or a table, not "
                    f"{type(inputs).__name__}") from None
    native = _native_parquet()
    if any(_is_table_path(f) and not (native and f.lower().endswith(_PARQUET_SUFFIXES))
           for f in files):
        raise Error("pack one Arrow file at a time (Parquet files may be listed together)")
    return files, []


class _Reporter:
    """progress=: a callable gets (done, total) bytes; True draws a tqdm bar when tqdm is
    installed, else the CLI's progress line on stderr."""

    def __init__(self, progress: ProgressArg, label: str):
        self.callback, self.show_line, self._bar = None, False, None
        if callable(progress):
            self.callback = progress
        elif progress:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                self.show_line = True
            else:
                self._bar = tqdm(total=0, unit="B", unit_scale=True, unit_divisor=1024,
                                 desc=label)
                self.callback = self._update

    def _update(self, done: int, total: int) -> None:
        if self._bar.total != total:
            self._bar.total = total
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _checks_texts(value) -> list:
    """--checks texts from {column: "finite,norm"} or {column: ["finite", "norm:0:1"]}."""
    if isinstance(value, dict):
        return [f"{column}={checks if isinstance(checks, str) else ','.join(checks) or 'none'}"
                for column, checks in value.items()]
    return _pairs(value, "checks")


def _part_text(value) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    try:
        index, count = value
    except (TypeError, ValueError):
        raise Error('part must be "K/N" or a pair (K, N)') from None
    return f"{index}/{count}"


def _texts(value) -> list:
    """An option's value as the CLI's text forms, one per value (repeatable options take a
    list): True -> "true", 3 -> "3", 0.5 -> "0.5", a path -> its text."""
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if isinstance(value, numbers.Number):
        return [str(value)]
    try:
        return [item for element in value for item in _texts(element)]
    except TypeError:
        raise Error(f"cannot pass a {type(value).__name__} as a pack option") from None


# Keywords whose Python forms (dicts, pairs, True) have a text form of their own; every other
# keyword's value is written as _texts writes it. Which keywords exist, their defaults and
# parsers are the pack option table's (gpucache/pack_options.hpp, _gpucache.pack_options()).
_TEXT_FORMS = {
    "fields": lambda value: _pairs(value, "fields"),
    "roles": lambda value: _pairs(value, "roles"),
    "dtype": lambda value: _pairs(value, "dtype"),
    "split": _split_text,
    "checks": _checks_texts,
    "part": _part_text,
    "compress": _compress_text,
}


def pack_option_keywords() -> list:
    """The keyword options pack() takes, from the pack option table."""
    return [entry[0] for entry in _gpucache.pack_options()]


def pack(inputs, out=None, *, progress: ProgressArg = False, **options) -> dict:
    """Packs inputs into the dataset folder `out`, like `gpucache pack`, and returns the result
    `gpucache pack --json` prints.

    inputs: a file or a list of files (any format `gpucache pack` reads); a dict of columns in
        memory, name -> numpy array, torch tensor, list of str (text), list of int lists
        (sequences), gpucache.VarColumn, numpy datetime64/timedelta64 or gpucache.TimeColumn
        (dates and times: int64 columns whose unit the manifest records); a list of dicts (rows),
        packed exactly as the same list saved in a .pt is; a {text: 1-D float tensor} dict (an
        LLM cache), packed as that dict in a .pt is (text + embedding, one row per key: the rule
        is docs/python.md's "What a dict means"; kind="tensors" keeps such a dict's values as
        columns); a list of gpucache.Input (a mixed project: each file with its own fields, kind
        and roles); a pyarrow Table / RecordBatch, a pandas or polars DataFrame, a
        Hugging Face Dataset or an Arrow IPC file (.arrow; these need pyarrow). Parquet files
        (or a folder of them) are read by gpucache's own reader, as the CLI reads them, without
        pyarrow; a build without that reader reads them through pyarrow, and so does a pack
        whose file that reader refuses while pyarrow reads it (with a RuntimeWarning naming the
        file and why).
    The CLI's options as keyword arguments, '-' written '_': kind, fields ({column: path} or
    ["column=path"]), roles ({column: role}), dtype ("f16" or {column: "bf16"}), split
    ({"train": 0.9, "val": 0.1}), split_by (a text or integer column: one dataset per value in
    out/VALUE, the column kept; see docs/cli.md), shard_size (bytes or "512M"), max_output (bytes or "2T", "none"
    for no cap; default 16 TiB: refuse a run whose shards would be larger), shard_rows, pad_to,
    compress ("zstd", "zstd:9", 9 or True), threads, force, resume, no_fsync (do not wait for the
    disk: faster, but a power failure soon after may leave a shard short), device ("auto", "cpu",
    "cuda"),
    norm_min, norm_max, dedup, pair_cos_min, pair_cos_max, on_overflow, on_null ("drop": rows
    with a null in a packed column are dropped with the reason null; "error"), normalize, max_rows,
    sample, shuffle, seed, rejects (a path), checks ({column: "finite,norm"} or
    {column: ["norm:0:1"]}; [] or "none" for no check), no_checks, part ("K/N" or (K, N): pack
    partition K of N, see docs/scale.md), append (a dataset folder to add the rows to, instead of
    out), strict (a field gpucache cannot store is an error instead of left out), input_map (the
    CLI's --input-map: a JSON map file of a mixed project's inputs, each with its own mapping;
    a list of gpucache.Input entries passes the same).
    Every field of the input becomes a column, or is listed with why in the result's "left_out"
    ([{"input", "field", "reason"}], also in the manifest); with fields=, only the columns named
    (and the standard columns of the kind) are packed, the others listed in "not_selected". A
    field whose key is no legal column name is stored under a legal one and listed in "renamed"
    ([{"input", "field", "column"}], also in the manifest). Column names may be 1 to 255 bytes.
    progress: a callable(done, total) told input bytes, True for a tqdm bar (or the CLI's line
        when tqdm is missing), False for nothing.
    """
    files, memory, tree, input_map = _sources(inputs, options.get("kind"))
    if input_map is not None:
        if options.get("input_map") is not None:
            raise Error("pack() got gpucache.Input entries and input_map=; pass one of them")
        options = dict(options, input_map=input_map)
    unknown = sorted(set(options) - set(pack_option_keywords()))
    if unknown:
        raise Error(f"pack() got unknown options: {', '.join(unknown)}")
    append = options.get("append")
    if (out is None) == (append is None):
        raise Error("pack() needs out= (a new dataset folder) or append= (an existing dataset), "
                    "one of them")
    keywords = {}
    for key, value in options.items():
        if key in _TEXT_FORMS:
            value = _TEXT_FORMS[key](value)
        if value is not None:
            keywords[key] = _texts(value)
    reporter = _Reporter(progress, "pack")
    try:
        try:
            text = _gpucache.pack_json(files, os.fspath(out) if out is not None else "", memory,
                                       keywords, reporter.show_line, reporter.callback, tree,
                                       host_leaf)
        except Error as error:
            fallback = _pyarrow_fallback(files, memory, error)
            if fallback is None:
                raise
            text = _gpucache.pack_json([], os.fspath(out) if out is not None else "", fallback,
                                       keywords, reporter.show_line, reporter.callback)
    finally:
        reporter.close()
    return json.loads(text)


# What the native Parquet reader's refusals of a feature it lacks say (src/inputs/parquet/
# FORMAT.md): a codec or encoding, chunks in other files, old BIT_PACKED levels, no column at all.
_UNSUPPORTED_MARKERS = ("which gpucache cannot read", "which gpucache does not decode",
                        "which gpucache does not follow", "holds no column gpucache can read",
                        "(only RLE is read)")


def _pyarrow_fallback(files: list, memory: list, error: Error):
    """When gpucache's own reader refused one of the Parquet files being packed and pyarrow
    reads them all: their columns through pyarrow (with a warning that says so), to pack the
    same way; else None, and the error stands. Only the refusal of a file (the message starts
    with its path) for a feature the reader lacks counts: not an option's, not bad data's."""
    if memory or not files or not all(f.lower().endswith(_PARQUET_SUFFIXES) for f in files):
        return None
    message = str(error)
    refused = next((f for f in files if message.startswith(f + ":")), None)
    # Only a feature the reader lacks, never bad data: pyarrow reads invalid UTF-8 unchecked and
    # narrows an INT(8) value of 300 to 44 without a word, which gpucache refuses to pass on.
    if refused is None or not any(marker in message for marker in _UNSUPPORTED_MARKERS):
        return None
    try:
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError:
        return None
    try:
        table = pyarrow.concat_tables([pq.read_table(f) for f in files])
    except Exception:  # pyarrow cannot read it either: gpucache's refusal stands
        return None
    warnings.warn(f"gpucache's Parquet reader refused {refused} ({message[len(refused) + 2:]}); "
                  f"packing {'it' if len(files) == 1 else 'the files'} through pyarrow instead",
                  RuntimeWarning, stacklevel=3)
    return memory_columns(_table_columns(table))


def verify(path, deep: bool = False, *, threads: int = 0, device: str = "auto",
           progress: ProgressArg = False, cache_dir=None) -> dict:
    """Checks every byte of a dataset or shard, like `gpucache verify`: the report
    `gpucache verify --json` prints. Corruption is reported, not raised: report["ok"] is False and
    report["problems"] names each file, column and byte range. Raises gpucache.Error only when the
    path cannot be read. A remote dataset (s3://..., http(s)://...) is fetched into cache_dir
    (default: GPUCACHE_CACHE, else a temporary folder) and the cached copies are checked."""
    reporter = _Reporter(progress, "verify")
    try:
        text = _gpucache.verify_json(os.fspath(path), deep, threads, device, reporter.show_line,
                                     reporter.callback,
                                     os.fspath(cache_dir) if cache_dir is not None else "")
    finally:
        reporter.close()
    return json.loads(text)


def inspect(path) -> dict:
    """A dataset's rows, columns, sizes and provenance, as `gpucache inspect --json` prints."""
    return json.loads(_gpucache.inspect_json(os.fspath(path)))


def probe(file, *, kind: Optional[str] = None, fields=None, roles=None):
    """What is inside an input file and how pack would map it, as `gpucache probe --json` prints
    for one file (a list for a list of files)."""
    if not isinstance(file, (str, os.PathLike)):
        return [probe(item, kind=kind, fields=fields, roles=roles) for item in file]
    return json.loads(_gpucache.probe_json(os.fspath(file), kind, _pairs(fields, "fields"),
                                           _pairs(roles, "roles")))


def export(path, to: str = "npy", out=None, *, columns: Optional[Sequence[str]] = None,
           threads: int = 0) -> dict:
    """Writes a dataset's columns out as .npy files (out: a folder) or one .safetensors file, like
    `gpucache export`; returns what `gpucache export --json` prints."""
    if out is None:
        raise Error("export() needs out=: a folder for npy, a file or folder for safetensors")
    if isinstance(columns, str):
        columns = [columns]
    return json.loads(_gpucache.export_json(os.fspath(path), to, os.fspath(out),
                                            list(columns or []), threads))


def push(dataset, url: str) -> dict:
    """Puts a packed dataset folder at url (s3://BUCKET/PREFIX, or an http(s):// server that
    accepts PUT), like `gpucache push`: every shard first, manifest.json last, so a reader never
    sees a partial dataset. Returns what `gpucache push --json` prints."""
    return json.loads(_gpucache.push_json(os.fspath(dataset), str(url)))


def merge(parts, out, *, copy: bool = False, no_fsync: bool = False) -> dict:
    """Joins datasets (the parts of a `pack --part` run, or any datasets packed alike) into the new
    dataset `out` by hard-linking their shards, like `gpucache merge`; copy=True copies shards that
    lie on another file system; no_fsync=True does not wait for the disk (as pack's). Returns what
    `gpucache merge --json` prints."""
    if isinstance(parts, (str, os.PathLike)):
        parts = [parts]
    return json.loads(_gpucache.merge_json([os.fspath(p) for p in parts], os.fspath(out), copy,
                                           not no_fsync))
