// The pack option table (gpucache/pack_options.hpp): one entry per option of `gpucache pack`.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "gpucache/checks.hpp"
#include "gpucache/error.hpp"
#include "gpucache/pack_options.hpp"

namespace gpucache {
namespace {

std::string quoted(std::string_view name, std::string_view text) {
  return std::string(name) + " '" + std::string(text) + "'";
}

bool parse_flag(std::string_view text, std::string_view name) {
  if (text == "true") return true;
  if (text == "false") return false;
  throw UsageError(quoted(name, text) + " must be true or false");
}

std::uint64_t parse_count(std::string_view text, std::string_view name) {
  const std::string copy(text);
  const bool digits = !copy.empty() && std::all_of(copy.begin(), copy.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = digits ? std::strtoull(copy.c_str(), &end, 10) : 0;
  if (!digits || errno == ERANGE)
    throw UsageError(quoted(name, text) + " is not a whole number from 0 to 2^64-1");
  return value;
}

double parse_number(std::string_view text, std::string_view name) {
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size())
    throw UsageError(quoted(name, text) + " is not a number");
  return value;
}

constexpr PackOptionInfo kPackOptions[] = {
    {"--kind", "kind", PackOptionType::text, "KIND", "",
     "Input layout when it is not detected: dialogue, embeddings, llm-cache or tensors", "", false,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.kind = parse_source_kind(text);
       if (!o.kind)
         throw UsageError(std::string(name) +
                          " must be dialogue, embeddings, llm-cache or tensors");
     },
     "embeddings"},
    {"--field", "fields", PackOptionType::texts, "COLUMN=PATH", "",
     "COLUMN=PATH: take a column from a key path in the input, e.g. embedding=data.vectors or "
     "question_embedding=[*].q_emb; COLUMN=FILE[:PATH]: from a file of its own, e.g. "
     "labels=labels.npy or labels=meta.npz:labels (repeatable)",
     "", false,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.fields.push_back(parse_field_spec(text));
     },
     "embedding=data.vectors"},
    {"--input-map", "input_map", PackOptionType::text, "MAP", "",
     "MAP: a JSON file listing the inputs of a mixed project, each with its own kind, fields "
     "and roles, mapped to the same columns (docs/cli.md, \"Mixed projects\"); instead of input "
     "files on the command line",
     "input_map", true,
     [](PackOptions& o, std::string_view text, std::string_view) { apply_input_map(o, text); },
     R"({"inputs": [{"path": "a.pt", "fields": {"embedding": "vectors"}}]})"},
    {"--role", "roles", PackOptionType::texts, "COLUMN=ROLE", "",
     "COLUMN=ROLE: what a column is for, embedding, tensor, sequence or text, when the layout "
     "says otherwise (repeatable)",
     "roles", true,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.roles.push_back(parse_role_spec(text));
     },
     "labels=tensor"},
    {"--dtype", "dtype", PackOptionType::texts, "TYPE", "",
     "Storage type of float columns: f32, f16 or bf16, or COLUMN=TYPE for one column "
     "(repeatable)",
     "dtype", true,
     [](PackOptions& o, std::string_view text, std::string_view) { apply_dtype_option(o, text); },
     "f16"},
    {"--split", "split", PackOptionType::text, "NAME=FRACTION,...", "",
     "NAME=FRACTION,...: write one dataset per split in OUT/NAME, e.g. train=0.9,val=0.1 (rows "
     "assigned by --seed)",
     "", false,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.splits = parse_split_spec(text);
     },
     "train=0.9,val=0.1"},
    {"--split-by", "split_by", PackOptionType::text, "COLUMN", "",
     "COLUMN: write one dataset per distinct value of this text or integer column in OUT/VALUE, "
     "e.g. a split column of train/val/test rows (the column is kept; rows null in it are "
     "dropped as null; not with --split)",
     "", false,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       if (text.empty()) throw UsageError(std::string(name) + " needs a column name");
       o.split_by = text;
     },
     "split"},
    {"--part", "part", PackOptionType::text, "K/N", "",
     "K/N: pack partition K of N of the inputs (sorted; whole files when there are at least N, "
     "else row ranges), e.g. --part $SLURM_ARRAY_TASK_ID/8; join the parts with gpucache merge",
     "part", true,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.part = parse_part_spec(text);
     },
     "1/4"},
    {"--append", "append", PackOptionType::text, "DATASET", "",
     "DATASET: add the inputs' rows to this dataset as new shards (same options as the "
     "dataset's; -o not needed)",
     "", false, [](PackOptions& o, std::string_view text, std::string_view) { o.append_to = text; },
     "data/emb"},
    {"--shard-size", "shard_size", PackOptionType::text, "SIZE", "1G",
     "Largest shard in bytes (K, M, G suffixes)", "shard_size", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.shard_size = parse_byte_size(text, name);
     },
     "512M"},
    {"--shard-rows", "shard_rows", PackOptionType::count, "N", "", "Most rows per shard",
     "shard_rows", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.shard_rows = parse_count(text, name);
     },
     "1000"},
    {"--max-output", "max_output", PackOptionType::text, "SIZE", "16T",
     "Refuse a run whose shards would exceed this many bytes (K, M, G, T suffixes; none: no "
     "cap); every run is also refused when its output would not fit in the free space of the "
     "output file system",
     "", false,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.max_output = parse_max_output(text);
     },
     "none"},
    {"--pad-to", "pad_to", PackOptionType::count, "N", "16",
     "Pad rows to a multiple of this many elements", "pad_to", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.pad_to = parse_count(text, name);
     },
     "64"},
    {"--compress", "compress", PackOptionType::text, "zstd[:LEVEL]", "",
     "Per-chunk compression: zstd or zstd:LEVEL (default off)", "compress", true,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.zstd_level = parse_compression(text);
     },
     "zstd:9"},
    {"--threads", "threads", PackOptionType::count, "N", "", "Worker threads (default: every core)",
     "", false,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       const auto threads = parse_count(text, name);
       if (threads > std::numeric_limits<unsigned>::max())
         throw UsageError(quoted(name, text) + " is too many threads");
       o.threads = static_cast<unsigned>(threads);
     },
     "4"},
    {"--force", "force", PackOptionType::flag, "", "",
     "Replace a dataset already in the output directory", "", false,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.force = parse_flag(text, name);
     },
     "true"},
    {"--resume", "resume", PackOptionType::flag, "", "",
     "Finish an interrupted pack (same inputs and options), keeping its complete shards", "", false,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.resume = parse_flag(text, name);
     },
     "true"},
    {"--no-fsync", "no_fsync", PackOptionType::flag, "", "",
     "Do not wait for the disk to hold the output (faster; a power failure soon after the pack "
     "may leave a shard short, which verify finds)",
     "", false,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.fsync = !parse_flag(text, name);
     },
     "true"},
    {"--device", "device", PackOptionType::text, "auto|cpu|cuda", "auto",
     "Validation backend: auto, cpu or cuda", "", false,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.validation.device = parse_device_option(text);
     },
     "cpu"},
    {"--checks", "checks", PackOptionType::texts, "COLUMN=CHECKS", "",
     "COLUMN=CHECK,CHECK,...: the checks of a column, replacing its defaults (finite, nonzero, "
     "norm or norm:MIN:MAX, pair_cos, dedup; or none); repeatable",
     "validation.columns", true,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.checks.push_back(parse_checks_spec(text));
     },
     "embedding=finite"},
    {"--no-checks", "no_checks", PackOptionType::flag, "", "",
     "Check no column (--on-overflow still applies to f16/bf16 storage)", "validation.columns",
     true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.no_checks = parse_flag(text, name);
     },
     "true"},
    {"--norm-min", "norm_min", PackOptionType::number, "X", "0.1",
     "Norm check: drop rows whose L2 norm is below this (0: no lower bound)", "validation.norm_min",
     true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.norm_min = parse_number(text, name);
     },
     "0.5"},
    {"--norm-max", "norm_max", PackOptionType::number, "X", "100",
     "Norm check: drop rows whose L2 norm is above this (inf: no upper bound)",
     "validation.norm_max", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.norm_max = parse_number(text, name);
     },
     "inf"},
    {"--dedup", "dedup", PackOptionType::flag, "", "",
     "Drop exact duplicate rows (the first occurrence is kept)", "validation.dedup", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.dedup = parse_flag(text, name);
     },
     "true"},
    {"--pair-cos-min", "pair_cos_min", PackOptionType::number, "X", "",
     "Dialogue: drop pairs whose question/answer cosine is lower", "validation.pair_cos_min", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.pair_cos_min = parse_number(text, name);
     },
     "0.2"},
    {"--pair-cos-max", "pair_cos_max", PackOptionType::number, "X", "",
     "Dialogue: drop pairs whose question/answer cosine is higher", "validation.pair_cos_max", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.pair_cos_max = parse_number(text, name);
     },
     "0.99"},
    {"--on-overflow", "on_overflow", PackOptionType::text, "drop|clamp|error", "error",
     "Values too large for --dtype: drop the row, clamp, or error", "validation.on_overflow", true,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.validation.on_overflow = parse_overflow_option(text);
     },
     "clamp"},
    {"--strict", "strict", PackOptionType::flag, "", "",
     "Refuse fields of the inputs that gpucache cannot store, instead of leaving them out "
     "(listed on stderr and in the manifest's left_out)",
     "", false,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.strict = parse_flag(text, name);
     },
     "true"},
    {"--on-null", "on_null", PackOptionType::text, "drop|error", "drop",
     "Rows with a null in a packed column (Parquet, Arrow, databases): drop them with the reason "
     "null, or error",
     "", false,
     [](PackOptions& o, std::string_view text, std::string_view) {
       o.on_null = parse_null_option(text);
     },
     "error"},
    {"--normalize", "normalize", PackOptionType::flag, "", "",
     "Scale every kept row to unit L2 norm", "validation.normalize", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.normalize = parse_flag(text, name);
     },
     "true"},
    {"--max-rows", "max_rows", PackOptionType::count, "N", "",
     "Keep at most N rows of each input (sampled with --seed)", "validation.max_rows_per_source",
     true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.max_rows_per_source = parse_count(text, name);
     },
     "100"},
    {"--sample", "sample", PackOptionType::number, "FRACTION", "",
     "Keep this fraction of each input's valid rows (0 to 1]", "validation.sample", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.sample_fraction = parse_number(text, name);
     },
     "0.5"},
    {"--shuffle", "shuffle", PackOptionType::flag, "", "",
     "Shuffle rows deterministically (with --seed) so training reads sequentially",
     "validation.shuffle", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.shuffle = parse_flag(text, name);
     },
     "true"},
    {"--seed", "seed", PackOptionType::count, "N", "0",
     "Seed for --sample, --max-rows and --shuffle", "validation.seed", true,
     [](PackOptions& o, std::string_view text, std::string_view name) {
       o.validation.seed = parse_count(text, name);
     },
     "7"},
    {"--rejects", "rejects", PackOptionType::text, "FILE.jsonl", "",
     "Write every dropped row to this JSON-lines file", "", false,
     [](PackOptions& o, std::string_view text, std::string_view) { o.rejects_path = text; },
     "dropped.jsonl"},
};

// Markdown's table cells: a '|' would end the cell.
std::string cell(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::span<const PackOptionInfo> pack_option_table() {
  return kPackOptions;
}

const PackOptionInfo* find_pack_option_flag(std::string_view flag) {
  for (const auto& info : kPackOptions)
    if (info.flag == flag) return &info;
  return nullptr;
}

const PackOptionInfo* find_pack_option_keyword(std::string_view python) {
  for (const auto& info : kPackOptions)
    if (info.python == python) return &info;
  return nullptr;
}

std::string_view pack_option_type_name(PackOptionType type) {
  switch (type) {
    case PackOptionType::flag:
      return "flag";
    case PackOptionType::count:
      return "count";
    case PackOptionType::number:
      return "number";
    case PackOptionType::text:
      return "text";
    case PackOptionType::texts:
      return "texts";
  }
  return "?";
}

std::string pack_options_markdown() {
  std::string text =
      "| option | Python | default | recorded as (compared by --resume/--append) | what it does "
      "|\n|---|---|---|---|---|\n";
  for (const auto& info : kPackOptions) {
    std::string option = "`" + std::string(info.flag);
    if (!info.value_name.empty()) option += " " + cell(info.value_name);
    option += "`";
    const std::string python = "`" + std::string(info.python) + "`" +
                               (info.type == PackOptionType::texts ? " (list or dict)" : "");
    const std::string fallback =
        info.default_text.empty() ? "" : "`" + cell(info.default_text) + "`";
    const std::string recorded =
        info.json_key.empty()
            ? "no"
            : "`" + std::string(info.json_key) + "`" + (info.compared ? "" : " (not compared)");
    text += "| " + option + " | " + python + " | " + fallback + " | " + recorded + " | " +
            cell(info.help) + " |\n";
  }
  return text;
}

}  // namespace gpucache
