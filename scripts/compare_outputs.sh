#!/usr/bin/env bash
# Packs the same inputs with two gpucache binaries and compares every output byte for byte: the
# check that a refactor changed no output (docs/reliability.md, "Byte-identical outputs").
#
#   scripts/compare_outputs.sh [--bench DIR] [--keep] OLD_GPUCACHE NEW_GPUCACHE [WORKDIR]
#
# Inputs: every fixture under tests/data (.pt, .npy, .npz, .safetensors, .jsonl), the fixtures that
# need --kind/--field packed with each mapping their refusal suggests, a few multi-input packs, and
# examples/data/*.pt and *.npy; with --bench DIR also every input file in DIR (scripts/bench.sh
# writes its synthetic data to bench-out/data). Each is packed with every option set below by
# both binaries, each run in its own directory with the same relative output path, and a case is
# the same when the exit codes, stdout, stderr and every output file (shards, manifest.json,
# rejects) are identical. An input both binaries refuse with the same exit code and message is
# compared once, under the default options, and skipped for the other option sets.
# Validation runs where --device auto puts it: compare on a GPU machine too when both binaries
# were built with CUDA.
#
# One line per case, then a summary; exit 0 when every case is the same, 1 on any difference, 2 on
# bad usage. WORKDIR (default: a temporary directory) holds each case's outputs; cases that are the
# same are deleted from it unless --keep, so differences are left there to inspect.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  echo "usage: scripts/compare_outputs.sh [--bench DIR] [--keep] OLD_GPUCACHE NEW_GPUCACHE [WORKDIR]" >&2
  exit 2
}
bench_dir="" keep=0
positional=()
while [ $# -gt 0 ]; do
  case $1 in
    --bench) [ $# -ge 2 ] || usage; bench_dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
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

# Inputs: a name, the mapping flags, the input files (absolute, the same for both binaries: the
# manifest records the paths it was given).
input_names=() input_flags=() input_files=()
add_input() {
  local name=$1 flags=$2
  shift 2
  input_names+=("$name")
  input_flags+=("$flags")
  local IFS=$'\x1f'
  input_files+=("$*")
}
is_input() {
  case $1 in *.pt | *.pth | *.npy | *.npz | *.safetensors | *.jsonl) return 0 ;; esac
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
  local joined="" difference
  for difference in "${differences[@]}"; do
    joined+="${joined:+; }$difference"
  done
  echo "$joined"
}

count_output_files() {
  (cd "$1/out" && find . -type f | wc -l)
}

cases=0 same=0 refused=0 different=0 skipped=0
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
    flags="${input_flags[$i]} ${set_flags[$s]}"
    run_pack "$old" "$dir/old" "$flags" "${files[@]}"
    run_pack "$new" "$dir/new" "$flags" "${files[@]}"
    mismatch=$(compare_runs "$dir/old" "$dir/new")
    status=$(cat "$dir/old/exit")
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
  "message identical), $different different; $skipped skipped (inputs both refuse)"
if [ "$keep" = 0 ] && [ "$different" = 0 ] && [ ${#positional[@]} -eq 2 ]; then
  rm -rf "$work"
fi
[ "$different" = 0 ]
