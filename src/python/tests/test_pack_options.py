"""gpucache.pack's keyword options are the pack option table's (gpucache/pack_options.hpp): each
is accepted, reaches the library with the CLI's parsers and defaults, and is documented; anything
else is refused. (tests/test_pack_options.cpp checks the table against the CLI and docs/cli.md.)"""
import json

import numpy
import pytest

import gpucache
from gpucache import _gpucache
from gpucache._tools import pack_option_keywords


def test_every_table_option_is_a_documented_keyword():
    table = _gpucache.pack_options()
    keywords = [entry[0] for entry in table]
    assert keywords == pack_option_keywords()
    assert len(set(keywords)) == len(keywords)
    for keyword, kind, default, flag, help_text in table:
        assert flag == "--" + keyword.replace("_", "-") or keyword in ("fields", "roles")
        assert kind in ("flag", "count", "number", "text", "texts")
        assert help_text
        assert keyword in gpucache.pack.__doc__, f"pack()'s docstring does not mention {keyword}"


def test_an_unknown_keyword_is_refused(tmp_path):
    with pytest.raises(gpucache.Error, match="unknown options: shard_bites"):
        gpucache.pack({"emb": numpy.ones((4, 8), numpy.float32)}, tmp_path / "ds",
                      shard_bites="1M")


def test_keywords_reach_the_manifest_through_the_table(tmp_path):
    columns = {"emb": numpy.ones((40, 8), numpy.float32)}
    result = gpucache.pack(columns, tmp_path / "ds", seed=5, pad_to=32, shard_size="4K",
                           dtype="f16", no_fsync=True, norm_max=float("inf"), dedup=False)
    assert result["rows"] == 40
    options = json.loads((tmp_path / "ds" / "manifest.json").read_text())["options"]
    assert options["validation"]["seed"] == 5
    assert options["pad_to"] == 32
    assert options["shard_size"] == 4096
    assert options["dtype"] == "f16"


def test_a_bad_value_names_the_keyword(tmp_path):
    columns = {"emb": numpy.ones((4, 8), numpy.float32)}
    with pytest.raises(gpucache.Error, match="seed 'many' is not a whole number"):
        gpucache.pack(columns, tmp_path / "ds", seed="many")
    with pytest.raises(gpucache.Error, match="takes one value"):
        gpucache.pack(columns, tmp_path / "ds", seed=[1, 2])
