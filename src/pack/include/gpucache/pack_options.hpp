// The pack option table: every option of `gpucache pack` (beyond the inputs and -o) declared once,
// with its flag, Python keyword, type, default, help, the manifest key it is recorded under and
// whether --resume/--append compare it. The CLI registers its flags and help from it, the Python
// extension applies gpucache.pack's keyword arguments through it, and docs/cli.md's option table
// is checked against it (tests/test_pack_options.cpp). Adding an option: docs/architecture.md,
// "Adding a pack option".
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "gpucache/pack.hpp"

namespace gpucache {

// How an option's value is written; every value reaches `apply` as text (Python's values are
// turned into the same text: True -> "true", 3 -> "3", 0.5 -> "0.5").
enum class PackOptionType {
  flag,    // no value on the CLI; "true" or "false" from Python
  count,   // a whole number >= 0
  number,  // a real number (inf allowed)
  text,    // one text form (a size, "zstd:9", "2/16", a path, ...)
  texts,   // a text form, repeatable (--dtype, --field, --checks, ...): a list from Python
};

struct PackOptionInfo {
  std::string_view flag;    // the CLI flag, "--shard-size"
  std::string_view python;  // gpucache.pack's keyword argument, "shard_size"
  PackOptionType type;
  std::string_view value_name;  // what the value is in the help and docs, "SIZE" ("" for a flag)
  // What an absent option means, as text ("1G"), shown by --help and docs/cli.md; "" when the
  // absence is described by the help text instead ("default: every core"). PackOptions' member
  // initialisers hold the same value (tests/test_pack_options.cpp checks that they agree).
  std::string_view default_text;
  std::string_view help;
  // Where manifest.json's "options" records the value ("shard_size", "validation.seed"); "" when
  // it is not recorded (it does not change the bytes, or it is recorded as the columns).
  std::string_view json_key;
  // Whether --resume and --append refuse a run whose value differs from the dataset's (both
  // compare the recorded options; --resume also compares the inputs and the shard plan).
  bool compared;
  // Parses `text` (the option's text form) into `options`. `name` is how the caller spelled the
  // option (the flag on the CLI, the keyword in Python), for the error message.
  void (*apply)(PackOptions& options, std::string_view text, std::string_view name);
  // A valid value other than the default, for the tests (and the examples in the docs table).
  std::string_view example;
};

// Every pack option, in the order `gpucache pack --help` lists them.
std::span<const PackOptionInfo> pack_option_table();
// The entry with this flag ("--seed") or Python keyword ("seed"); nullptr when there is none.
const PackOptionInfo* find_pack_option_flag(std::string_view flag);
const PackOptionInfo* find_pack_option_keyword(std::string_view python);
// The type as the docs and Python name it: "flag", "count", "number", "text", "texts".
std::string_view pack_option_type_name(PackOptionType type);
// docs/cli.md's table of pack options, made from the table (one row per option).
std::string pack_options_markdown();

}  // namespace gpucache
