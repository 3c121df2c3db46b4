"""The one place that knows how the gpucache Python package is called, so the harness follows the
package as it grows. Every function raises FeatureMissing when the feature is not in the
installed build; the measuring child processes report it as "not available in this build".
"""
from __future__ import annotations

from collections.abc import Mapping


class FeatureMissing(RuntimeError):
    pass


def module():
    try:
        import gpucache
    except ImportError as error:
        raise FeatureMissing(f"Python package gpucache is not installed ({error})") from None
    return gpucache


def require(name: str):
    package = module()
    if not hasattr(package, name):
        raise FeatureMissing(f"gpucache.{name} does not exist in this build")
    return getattr(package, name)


def load(path, device: str, verify: bool):
    return require("load")(str(path), device=device, verify=verify)


def _as_torch(value):
    import torch
    if isinstance(value, torch.Tensor):
        return value
    if hasattr(value, "__dlpack__"):
        return torch.utils.dlpack.from_dlpack(value)
    try:
        import numpy as np
        if isinstance(value, np.ndarray):
            return torch.from_numpy(value)
    except ImportError:
        pass
    return None


def tensors(loaded) -> list:
    """The embedding (float) column tensors of what gpucache.load returned, as torch tensors.
    gpucache.Dataset has `tensors` (name -> logical view); a dict of columns or a single tensor
    are accepted too."""
    candidates = None
    if isinstance(loaded, Mapping):
        candidates = list(loaded.values())
    else:
        for attribute in ("tensors", "columns"):
            value = getattr(loaded, attribute, None)
            if callable(value):
                value = value()
            if isinstance(value, Mapping):
                candidates = list(value.values())
                break
            if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
                candidates = [loaded[name] for name in value]
                break
        if candidates is None:
            candidates = [loaded]
    out = [t for t in (_as_torch(v) for v in candidates) if t is not None]
    floats = [t for t in out if t.is_floating_point()]
    out = floats or out  # the embedding columns, not the provenance (source, source_row) ones
    if not out:
        raise FeatureMissing(f"cannot find tensors in what gpucache.load returned "
                             f"({type(loaded).__name__})")
    return out


def gpu_batches(loaded, batch_size: int, shuffle: bool = True):
    cls = require("GPUBatches")
    try:
        return cls(loaded, batch_size=batch_size, shuffle=shuffle)
    except TypeError as error:
        raise FeatureMissing(f"gpucache.GPUBatches(data, batch_size=, shuffle=) failed: {error}")
