#!/usr/bin/env bash
# Packs the same inputs with two gpucache binaries and compares every output byte for byte: the
# check that a refactor changed no output (docs/reliability.md, "Byte-identical outputs").
#
#   scripts/compare_outputs.sh [--bench DIR] [--keep] [--sets LIST] [--inputs REGEX] [--flags WORDS]
#                              [--known BASE] OLD_GPUCACHE NEW_GPUCACHE [WORKDIR]
#
# Inputs: every fixture under tests/data (.pt, .npy, .npz, .safetensors, .jsonl, .parquet), the
# fixtures that need --kind/--field packed with each mapping their refusal suggests, a few
# multi-input packs, and examples/data/*.pt and *.npy; with --bench DIR also every input file in
# DIR (scripts/bench.sh writes its synthetic data to bench-out/data). Each is packed with every
# option set below by both binaries, each run in its own directory with the same relative output
# path, and a case is the same when the exit codes, stdout, stderr and every output file
# (shards, manifest.json, rejects) are identical. An input both binaries refuse with the same exit code and message is
# compared once, under the default options, and skipped for the other option sets.
# Validation runs where --device auto puts it: compare on a GPU machine too when both binaries
# were built with CUDA.
#
# --sets default,zstd runs only the named option sets; --inputs REGEX only the inputs whose names
# (as printed) match the extended regular expression. --flags "--device cpu" appends words to
# every pack (there, so that a build with CUDA and one without print the same validation line on a
# machine without a GPU).
#
# --known BASE compares modulo the output changes made on purpose since commit BASE, a named list
# (only f8df3b6 has one: the changes of issues 27 and 28 that landed after it, each with the commit
# that made it, in the `case $known` below and in known_manifests):
#   3e7bc3d  provenance columns @source (i32) and @source_row (i64), were source (u16) and
#            source_row (u64): left out, with what follows from their width (shard sizes and header
#            hashes, the manifest's hash, "packed ... (N bytes)");
#   3e7bc3d  every field a column or left out loudly: NEW's columns that OLD lacks are taken out
#            when OLD's are all among them; the lines "left out: ..." and "note: --field keeps only
#            the columns it names ..."; the manifest's left_out;
#   3e7bc3d  "stored as f32: column '...' holds f64 values" reported;
#   a21ca9a  the user's names kept (a lone matrix keeps its name): columns renamed in manifest order
#            when they agree otherwise; the manifest's renamed;
#   d90229b  the drop reason null, counted ("null": 0) wherever drop counts are;
#   da16ffe  the manifest's input_conversions (issue 28).
# A case whose bytes differ is then "same modulo known" when the exit codes and file lists agree,
# stdout and stderr agree without the listed lines, each manifest.json agrees once normalised so,
# and every column both have exports (by NEW's `gpucache export --to npy`, from both datasets) to
# identical files; rejects files are compared as they are. Anything else is still a difference.
# Without --known every byte must agree.
#
# One line per case, then a summary; exit 0 when every case is the same, 1 on any difference, 2 on
# bad usage. WORKDIR (default: a temporary directory) holds each case's outputs; cases that are the
# same are deleted from it unless --keep, so differences are left there to inspect.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  echo "usage: scripts/compare_outputs.sh [--bench DIR] [--keep] [--sets LIST] [--inputs REGEX]" \
    "[--flags WORDS] [--known BASE] OLD_GPUCACHE NEW_GPUCACHE [WORKDIR]" >&2
  exit 2
}
bench_dir="" keep=0 only_sets="" only_inputs="" extra_flags="" known=""
positional=()
while [ $# -gt 0 ]; do
  case $1 in
    --bench) [ $# -ge 2 ] || usage; bench_dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --sets) [ $# -ge 2 ] || usage; only_sets=$2; shift 2 ;;
    --inputs) [ $# -ge 2 ] || usage; only_inputs=$2; shift 2 ;;
    --flags) [ $# -ge 2 ] || usage; extra_flags=$2; shift 2 ;;
    --known) [ $# -ge 2 ] || usage; known=$2; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "compare_outputs: unknown option $1" >&2; usage ;;
    *) positional+=("$1"); shift ;;
  esac
done
if [ ${#positional[@]} -lt 2 ] || [ ${#positional[@]} -gt 3 ]; then usage; fi
binary_path() {
  if [ ! -f "$1" ] || [ ! -x "$1" ]; then
    echo "compare_outputs: $1 is not an executable" >&2
    exit 2
  fi
  echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
}
old=$(binary_path "${positional[0]}")
new=$(binary_path "${positional[1]}")
if [ ${#positional[@]} -eq 3 ]; then
  work=${positional[2]}
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/gpucache-compare.XXXXXX")
fi
if [ -n "$bench_dir" ]; then
  [ -d "$bench_dir" ] || { echo "compare_outputs: --bench $bench_dir is not a directory" >&2; exit 2; }
  bench_dir=$(cd "$bench_dir" && pwd)
fi

# Option sets: every input is packed with each.
set_names=(default f16 bf16-dedup-shuffle zstd shard-rows-64 rejects)
set_flags=(
  ""
  "--dtype f16"
  "--dtype bf16 --dedup --shuffle --seed 3"
  "--compress zstd"
  "--shard-rows 64"
  "--rejects rejects.jsonl"
)

if [ -n "$only_sets" ]; then
  chosen_names=() chosen_flags=()
  for s in "${!set_names[@]}"; do
    case ",$only_sets," in *",${set_names[$s]},"*)
      chosen_names+=("${set_names[$s]}")
      chosen_flags+=("${set_flags[$s]}")
      ;;
    esac
  done
  if [ ${#chosen_names[@]} -eq 0 ]; then
    echo "compare_outputs: --sets $only_sets names no option set (${set_names[*]})" >&2
    exit 2
  fi
  set_names=("${chosen_names[@]}") set_flags=("${chosen_flags[@]}")
fi

# The output changes made on purpose since a base commit (--known BASE): lines of stdout and stderr
# that are new (an extended regular expression each), and the manifest normalisation that
# known_manifests applies (by the same BASE). Each names the commit that made it.
case $known in
  "") ;;
  f8df3b6)
    # 3e7bc3d (issue 27): a float column stored in another dtype than its input's is reported.
    known_new_lines=("^stored as [a-z0-9]+: column '.*' holds [a-z0-9]+ values"
      # 3e7bc3d: every field is a column or left out loudly (stderr and the manifest's left_out),
      # and what --field does not name is listed.
      "^left out: " "^note: --field keeps only the columns it names; not packed: ")
    # 3e7bc3d: the provenance columns are wider (i32/i64 for u16/u64), so the shards' total size
    # in "packed ... (N bytes)" changes with them.
    known_rewrites=('s/^(packed .* into [0-9]+ shards? )\([0-9]+ bytes\)/\1(N bytes)/')
    ;;
  *)
    echo "compare_outputs: --known $known: no list of known changes for that commit" >&2
    exit 2
    ;;
esac

# Inputs: a name, the mapping flags, the input files (absolute, the same for both binaries: the
# manifest records the paths it was given).
input_names=() input_flags=() input_files=()
add_input() {
  local name=$1 flags=$2
  shift 2
  if [ -n "$only_inputs" ] && ! grep -Eq -- "$only_inputs" <<<"$name"; then return 0; fi
  input_names+=("$name")
  input_flags+=("$flags")
  local IFS=$'\x1f'
  input_files+=("$*")
}
is_input() {
  case $1 in *.pt | *.pth | *.npy | *.npz | *.safetensors | *.jsonl | *.parquet) return 0 ;; esac
  return 1
}

data=$root/tests/data
while IFS= read -r file; do
  add_input "${file#"$data"/}" "" "$file"
done < <(find "$data" -type f | LC_ALL=C sort | while IFS= read -r f; do is_input "$f" && echo "$f"; done)
# Fixtures with several candidate matrices: pack is refused above and told which --field to pass;
# these pack each candidate (tests/test_pack_inputs.cpp maps npz and legacy the same way).
for field in f32 empty; do
  add_input "npz/stored.npz{$field}" "--kind embeddings --field embedding=$field" "$data/npz/stored.npz"
done
add_input "npz/deflated.npz{f32}" "--kind embeddings --field embedding=f32" "$data/npz/deflated.npz"
for field in view param; do
  add_input "pt/legacy.pt{$field}" "--kind embeddings --field embedding=$field" "$data/pt/legacy.pt"
done
for field in base transposed sliced every_other; do
  add_input "pt/views.pt{$field}" "--kind embeddings --field embedding=$field" "$data/pt/views.pt"
done
for field in f64 f32 f16 bf16; do
  add_input "safetensors/all_dtypes.safetensors{$field}" \
    "--kind embeddings --field embedding=$field" "$data/safetensors/all_dtypes.safetensors"
done
add_input "pt/legacy.pt{dialogue}" \
  "--kind dialogue --field question_embedding=view --field answer_embedding=param" "$data/pt/legacy.pt"
# Several inputs in one dataset (provenance columns, concatenation across formats and layouts).
add_input "pt/dialogue_list.pt+dialogue_dict.pt" "" "$data/pt/dialogue_list.pt" "$data/pt/dialogue_dict.pt"
add_input "npy/f32_c.npy+f64_big_fortran.npy" "" "$data/npy/f32_c.npy" "$data/npy/f64_big_fortran.npy"
add_input "examples/embeddings-part-0.npy+part-1.npy" "" \
  "$root/examples/data/embeddings-part-0.npy" "$root/examples/data/embeddings-part-1.npy"
for file in "$root"/examples/data/*.pt "$root"/examples/data/*.npy; do
  [ -f "$file" ] && add_input "examples/$(basename "$file")" "" "$file"
done
if [ -n "$bench_dir" ]; then
  while IFS= read -r file; do
    add_input "bench/$(basename "$file")" "" "$file"
  done < <(find "$bench_dir" -maxdepth 1 -type f | LC_ALL=C sort | while IFS= read -r f; do is_input "$f" && echo "$f"; done)
fi

# Runs one binary on one case in DIR: outputs under DIR/out (the working directory, so -o and
# --rejects are the same relative paths for both), logs beside it.
run_pack() {
  local binary=$1 dir=$2 flags=$3
  shift 3
  mkdir -p "$dir/out"
  local status=0
  # shellcheck disable=SC2086  # the flags are words without spaces
  (cd "$dir/out" && "$binary" pack "$@" -o ds --quiet $flags >"$dir/stdout" 2>"$dir/stderr") ||
    status=$?
  echo "$status" >"$dir/exit"
}

# The differences found, one line, "; " between them (empty when there are none).
joined_differences() {
  local joined="" difference
  for difference in "$@"; do
    joined+="${joined:+; }$difference"
  done
  echo "$joined"
}

# Compares the two runs of a case; prints what differs (nothing when they are the same).
compare_runs() {
  local a=$1 b=$2
  local differences=()
  [ "$(cat "$a/exit")" = "$(cat "$b/exit")" ] ||
    differences+=("exit code $(cat "$a/exit") vs $(cat "$b/exit")")
  cmp -s "$a/stdout" "$b/stdout" || differences+=("stdout differs")
  cmp -s "$a/stderr" "$b/stderr" || differences+=("stderr differs")
  local files_a files_b
  files_a=$(cd "$a/out" && find . -type f | LC_ALL=C sort)
  files_b=$(cd "$b/out" && find . -type f | LC_ALL=C sort)
  if [ "$files_a" != "$files_b" ]; then
    differences+=("file lists differ: $(diff <(echo "$files_a") <(echo "$files_b") | grep '^[<>]' |
      tr '\n' ' ')")
  fi
  local file detail
  while IFS= read -r file; do
    if [ -z "$file" ] || [ ! -f "$b/out/$file" ]; then continue; fi
    if ! detail=$(cmp "$a/out/$file" "$b/out/$file" 2>&1); then
      detail=${detail##*: } # "byte N, line M", or "EOF on FILE after byte N, in line M"
      differences+=("${file#./} differs (${detail%, *})")
    fi
  done <<<"$files_a"
  joined_differences "${differences[@]}"
}

# OLD's and NEW's manifest.json with the known changes since BASE undone (--known), written as
# sorted JSON to OUT/old.json and OUT/new.json, and OUT/names: "OLD_NAME NEW_NAME" per renamed
# column.
known_manifests() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
old, new = (json.load(open(path)) for path in sys.argv[1:3])
out = sys.argv[3]
provenance = {"source", "source_row", "@source", "@source_row"}
def normalised(m):
    # 3e7bc3d (issue 27): the provenance columns are @source (i32) and @source_row (i64), no longer
    # source (u16) and source_row (u64): left out here; their shards are compared by export without
    # them, so the shards' sizes and header hashes and the manifest's own hash go too.
    m["columns"] = [c for c in m.get("columns", []) if c.get("name") not in provenance]
    for shard in m.get("shards", []):
        shard.pop("header_hash", None)
        shard.pop("bytes", None)
    m.pop("manifest_hash", None)
    # 3e7bc3d, a21ca9a (issue 27), da16ffe (issue 28): what was left out, renamed or converted
    # is recorded in the manifest.
    for key in ("left_out", "renamed", "input_conversions"):
        m.pop(key, None)
    def walk(node):
        if isinstance(node, dict):
            # d90229b (issue 28): the drop reason null, counted (0) wherever drop counts are.
            if "nan_inf" in node and node.get("null") == 0:
                del node["null"]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(m)
    return json.dumps(m, sort_keys=True, indent=1)

# a21ca9a (issue 27): the user's names are kept (a lone float matrix keeps its name, say, where it
# was called embedding): NEW's names replace OLD's, column by column in manifest order, wherever
# OLD's appear (column entries, options, statistics), when the columns agree otherwise.
def columns(m):
    return [c for c in m.get("columns", []) if c.get("name") not in provenance]
names = {}
if len(columns(old)) == len(columns(new)):
    for a, b in zip(columns(old), columns(new)):
        if a["name"] != b["name"] and {**a, "name": b["name"]} == b:
            names[a["name"]] = b["name"]
# 3e7bc3d (issue 27): every field of an input is a column (or left out loudly), where OLD dropped
# the fields its layout did not name without a word: NEW's columns that OLD lacks are taken out
# of NEW's manifest (entries, options, statistics) when OLD's columns are all among NEW's.
old_names = [names.get(c["name"], c["name"]) for c in columns(old)]
new_names = [c["name"] for c in columns(new)]
extra = set()
if set(old_names) < set(new_names):
    extra = set(new_names) - set(old_names)
def without(node, key=None):
    if isinstance(node, dict):
        return {k: without(v, k) for k, v in node.items() if k not in extra}
    if isinstance(node, list):
        return [without(v, key) for v in node
                if not (isinstance(v, dict) and v.get("name") in extra)
                and not (key == "validated_columns" and v in extra)]
    return node
new = without(new)
with open(out + "/columns", "w") as f:  # the columns both export: OLD's (in NEW's names)
    for name in old_names:
        f.write(name + "\n")
def rename(node, key=None):
    if isinstance(node, dict):
        return {names.get(k, k): rename(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [rename(v, key) for v in node]
    if key in ("name", "column", "validated_columns") and isinstance(node, str):
        return names.get(node, node)
    return node
old = rename(old)
with open(out + "/names", "w") as f:
    for a, b in names.items():
        f.write(a + " " + b + "\n")
for side, m in (("old", old), ("new", new)):
    with open(out + "/" + side + ".json", "w") as f:
        f.write(normalised(m))
PY
}

# The columns KNOWN/columns names (NEW's names; OLD's through KNOWN/names for SIDE old) of
# DATASET, exported by NEW into DIR.
known_export() {
  local dataset=$1 dir=$2 known_dir=$3 side=$4 columns=() name old_name new_name
  while IFS= read -r name; do
    if [ "$side" = old ]; then
      while read -r old_name new_name; do
        [ "$new_name" = "$name" ] && name=$old_name
      done <"$known_dir/names"
    fi
    columns+=(--column "$name")
  done <"$known_dir/columns"
  [ ${#columns[@]} -gt 0 ] || { mkdir -p "$dir"; return 0; }
  "$new" export "$dataset" "$dir" --to npy --quiet "${columns[@]}" >/dev/null 2>&1
}

# Compares the two runs of a differing case modulo the known changes; prints what still differs.
compare_known() {
  local a=$1 b=$2
  local differences=()
  [ "$(cat "$a/exit")" = "$(cat "$b/exit")" ] || differences+=("exit code")
  local stream pattern filter=() rewrite=()
  for pattern in "${known_new_lines[@]}"; do filter+=(-e "$pattern"); done
  for pattern in "${known_rewrites[@]}"; do rewrite+=(-e "$pattern"); done
  for stream in stdout stderr; do
    cmp -s <(grep -Ev "${filter[@]}" "$a/$stream" | sed -E "${rewrite[@]}") \
      <(grep -Ev "${filter[@]}" "$b/$stream" | sed -E "${rewrite[@]}") ||
      differences+=("$stream differs beyond the known changes")
  done
  local files_a files_b file
  files_a=$(cd "$a/out" && find . -type f | LC_ALL=C sort)
  files_b=$(cd "$b/out" && find . -type f | LC_ALL=C sort)
  [ "$files_a" = "$files_b" ] || differences+=("file lists differ")
  while IFS= read -r file; do
    [ -n "$file" ] && [ -f "$b/out/$file" ] || continue
    case $file in
      */manifest.json)
        local dataset=${file%/manifest.json} known_dir=$b/known/${file%/manifest.json}
        rm -rf "$known_dir" "$a/export/$dataset" "$b/export/$dataset"
        mkdir -p "$known_dir"
        if ! known_manifests "$a/out/$file" "$b/out/$file" "$known_dir" ||
          ! cmp -s "$known_dir/old.json" "$known_dir/new.json"; then
          differences+=("${file#./} differs beyond the known changes")
        fi
        if ! known_export "$a/out/$dataset" "$a/export/$dataset" "$known_dir" old ||
          ! known_export "$b/out/$dataset" "$b/export/$dataset" "$known_dir" new; then
          differences+=("${dataset#./} does not export")
        else
          # A renamed column's files (NAME.npy, NAME.values.npy, ...) take NEW's name.
          local old_name new_name exported
          while read -r old_name new_name; do
            for exported in "$a/export/$dataset/$old_name".*; do
              [ -e "$exported" ] || continue
              mv "$exported" "$a/export/$dataset/$new_name.${exported#"$a/export/$dataset/$old_name".}"
            done
          done <"$known_dir/names"
          diff -rq "$a/export/$dataset" "$b/export/$dataset" >/dev/null ||
            differences+=("${dataset#./}'s columns differ")
        fi
        ;;
      *.gcs) ;; # compared through the export above
      *) cmp -s "$a/out/$file" "$b/out/$file" || differences+=("${file#./} differs") ;;
    esac
  done <<<"$files_a"
  joined_differences "${differences[@]}"
}

count_output_files() {
  (cd "$1/out" && find . -type f | wc -l)
}

cases=0 same=0 refused=0 different=0 skipped=0 same_known=0
echo "compare_outputs: old $old"
echo "compare_outputs: new $new"
echo "compare_outputs: ${#input_names[@]} inputs x ${#set_names[@]} option sets, work in $work"
for i in "${!input_names[@]}"; do
  IFS=$'\x1f' read -r -a files <<<"${input_files[$i]}"
  refused_by_both=0
  for s in "${!set_names[@]}"; do
    label="${input_names[$i]} [${set_names[$s]}]"
    if [ "$refused_by_both" = 1 ]; then
      skipped=$((skipped + 1))
      continue
    fi
    cases=$((cases + 1))
    dir=$work/$(printf '%03d-%s' "$i" "${set_names[$s]}")
    rm -rf "$dir"
    flags="${input_flags[$i]} ${set_flags[$s]} $extra_flags"
    run_pack "$old" "$dir/old" "$flags" "${files[@]}"
    run_pack "$new" "$dir/new" "$flags" "${files[@]}"
    mismatch=$(compare_runs "$dir/old" "$dir/new")
    status=$(cat "$dir/old/exit")
    if [ -n "$mismatch" ] && [ -n "$known" ] && [ -z "$(compare_known "$dir/old" "$dir/new")" ]; then
      same_known=$((same_known + 1))
      echo "known $label: same modulo the changes since $known (bytes: $mismatch)"
      [ "$keep" = 1 ] || rm -rf "$dir"
      continue
    fi
    if [ -n "$mismatch" ]; then
      different=$((different + 1))
      echo "DIFF  $label: $mismatch (outputs in $dir)"
      continue
    fi
    same=$((same + 1))
    if [ "$status" = 0 ]; then
      echo "same  $label: $(count_output_files "$dir/old") files"
    else
      refused=$((refused + 1))
      [ "$s" = 0 ] && refused_by_both=1
      echo "same  $label: refused by both (exit $status$([ "$s" = 0 ] &&
        echo ", other option sets skipped")): $(grep -v '^validation device' "$dir/old/stderr" |
        head -n 1 | sed "s|$root/||g" | cut -c1-100)"
    fi
    [ "$keep" = 1 ] || rm -rf "$dir"
  done
done

echo "compare_outputs: $cases cases: $same same ($refused of them refused by both, exit code and" \
  "message identical), $different different; $skipped skipped (inputs both refuse)$([ -n "$known" ] &&
    echo "; $same_known same only modulo the changes since $known")"
if [ "$keep" = 0 ] && [ "$different" = 0 ] && [ ${#positional[@]} -eq 2 ]; then
  rm -rf "$work"
fi
[ "$different" = 0 ]
