"""Dates and times from Python: numpy datetime64/timedelta64 arrays, pandas DataFrames with a
time-zone-aware column and NaT, Arrow tables of every temporal type, and Parquet files written by
pyarrow pack into int64 columns whose kind, unit and zone the manifest records; NaT and Arrow
nulls drop their rows with the reason null (or refuse with on_null="error"); load hands out int64
tensors with Dataset.times; export writes datetime64/timedelta64 equal to the input."""
import json

import numpy
import pytest
import torch

import gpucache


def loaded(path):
    return gpucache.load(path, device=torch.device("cpu"))


def manifest_times(path):
    manifest = json.loads((path / "manifest.json").read_text())
    return {c["name"]: c["time"] for c in manifest["columns"] if "time" in c}


def test_numpy_datetime64_dict_round_trips_through_export(tmp_path):
    when = numpy.array(["2024-01-01T00:00:00.000001", "NaT", "1969-12-31T23:59:59",
                        "2000-02-29T12:00"], dtype="datetime64[us]")
    day = numpy.array(["2020-01-01", "2020-01-02", "1900-01-01", "2100-12-31"],
                      dtype="datetime64[D]")
    took = numpy.array([0, 5, -7, 10**15], dtype="timedelta64[ns]")
    hours = numpy.array([0, 1, 2, 3], dtype="datetime64[h]")  # stored in seconds, exactly
    x = numpy.arange(4, dtype=numpy.int32)
    result = gpucache.pack({"when": when, "day": day, "took": took, "hours": hours, "x": x},
                           tmp_path / "ds")
    assert result["rows"] == 3 and result["dropped"]["null"] == 1
    assert {entry["column"]: (entry["kind"], entry["unit"], entry["tz"])
            for entry in result["times"]} == {
        "when": ("timestamp", "us", None), "day": ("date", "D", None),
        "took": ("duration", "ns", None), "hours": ("timestamp", "s", None)}
    assert manifest_times(tmp_path / "ds")["day"] == {"kind": "date", "unit": "D", "tz": None}
    kept = numpy.array([0, 2, 3])
    ds = loaded(tmp_path / "ds")
    assert ds.tensors["when"].dtype == torch.int64
    numpy.testing.assert_array_equal(ds.tensors["when"].numpy(), when[kept].view(numpy.int64))
    assert ds.times["took"] == {"kind": "duration", "unit": "ns", "tz": None}
    assert "x" not in ds.times
    gpucache.export(tmp_path / "ds", to="npy", out=tmp_path / "out")
    for name, array in (("when", when), ("day", day), ("took", took)):
        back = numpy.load(tmp_path / "out" / f"{name}.npy")
        assert back.dtype == array.dtype, name
        numpy.testing.assert_array_equal(back, array[kept])
    back = numpy.load(tmp_path / "out" / "hours.npy")
    assert back.dtype == numpy.dtype("datetime64[s]")
    numpy.testing.assert_array_equal(back, hours[kept].astype("datetime64[s]"))


def test_nat_refused_with_on_null_error(tmp_path):
    when = numpy.array(["2024-01-01", "NaT"], dtype="datetime64[ms]")
    with pytest.raises(gpucache.Error, match="when"):
        gpucache.pack({"when": when}, tmp_path / "ds", on_null="error")


def test_units_numpy_has_but_gpucache_does_not_store_are_refused(tmp_path):
    with pytest.raises(gpucache.Error, match="finer than nanoseconds"):
        gpucache.pack({"t": numpy.array([1, 2], dtype="datetime64[ps]")}, tmp_path / "ds")


def test_pandas_time_zone_and_nat(tmp_path):
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pandas.DataFrame({
        "created_at": pandas.to_datetime(["2024-03-31 01:30", None, "2024-10-27 02:30",
                                          "1970-01-01 00:00"]).tz_localize("UTC").tz_convert(
                                              "Europe/Berlin"),
        "label": numpy.arange(4, dtype=numpy.int64),
    })
    result = gpucache.pack(frame, tmp_path / "ds")
    assert result["rows"] == 3 and result["dropped"]["null"] == 1
    unit = str(frame["created_at"].dtype.unit)
    assert manifest_times(tmp_path / "ds") == {
        "created_at": {"kind": "timestamp", "unit": unit, "tz": "Europe/Berlin"}}
    ds = loaded(tmp_path / "ds")
    expected = frame["created_at"].dropna().array.asi8
    numpy.testing.assert_array_equal(ds.tensors["created_at"].numpy(), expected)
    assert ds.tensors["created_at"].sum().item() == int(expected.sum())  # torch computes on it
    with pytest.raises(gpucache.Error, match="created_at"):
        gpucache.pack(frame, tmp_path / "refused", on_null="error")


def test_arrow_temporal_types(tmp_path):
    pa = pytest.importorskip("pyarrow")
    table = pa.table({
        "ts": pa.array([0, 1_700_000_000_000_000, None], pa.timestamp("us", tz="UTC")),
        "d32": pa.array([0, 19_000, -1], pa.date32()),
        "d64": pa.array([0, 86_400_000, -86_400_000], pa.date64()),
        "t32": pa.array([0, 1000, 86_399_000], pa.time32("ms")),
        "t64": pa.array([0, 1, 2], pa.time64("ns")),
        "dur": pa.array([-1, 0, 1], pa.duration("s")),
    })
    gpucache.pack(table, tmp_path / "ds")
    assert manifest_times(tmp_path / "ds") == {
        "ts": {"kind": "timestamp", "unit": "us", "tz": "UTC"},
        "d32": {"kind": "date", "unit": "D", "tz": None},
        "d64": {"kind": "date", "unit": "ms", "tz": None},
        "t32": {"kind": "time", "unit": "ms", "tz": None},
        "t64": {"kind": "time", "unit": "ns", "tz": None},
        "dur": {"kind": "duration", "unit": "s", "tz": None},
    }
    ds = loaded(tmp_path / "ds")
    assert len(ds) == 2  # the null timestamp's row is dropped
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        width = pa.int32() if column.type.bit_width == 32 else pa.int64()
        expected = numpy.array(column.view(width).to_pylist()[:2], dtype=numpy.int64)
        numpy.testing.assert_array_equal(ds.tensors[name].numpy(), expected, err_msg=name)


def test_pyarrow_parquet_round_trip_equals_pyarrow(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({
        "ts": pa.array([-1, 0, 1_700_000_000_123_456], pa.timestamp("us", tz="UTC")),
        "naive": pa.array([5, 6, 7], pa.timestamp("ms")),
        "day": pa.array([-1, 0, 19_000], pa.date32()),
    })
    pq.write_table(table, tmp_path / "t.parquet")
    gpucache.pack(tmp_path / "t.parquet", tmp_path / "ds")
    gpucache.export(tmp_path / "ds", to="npy", out=tmp_path / "out")
    read = pq.read_table(tmp_path / "t.parquet")
    for name in read.column_names:
        expected = read.column(name).to_numpy()
        if expected.dtype.kind == "O":  # dates: datetime.date objects
            expected = numpy.array(expected, dtype="datetime64[D]")
        back = numpy.load(tmp_path / "out" / f"{name}.npy")
        numpy.testing.assert_array_equal(back, expected.astype(back.dtype), err_msg=name)
        assert back.dtype == expected.dtype, name
