"""Synthetic benchmark data: the same numbers in every format users have.

Three kinds, as users store them (docs/users.md):
  dialogue    list of dicts {question, answer, question_embedding [D], answer_embedding [D]},
              one tensor (storage) per row and side, as built row by row by an encoder
  embeddings  one [N, D] float32 matrix
  llm-cache   dict text -> [D] tensor, one storage per entry
Each kind is written as .pt (torch.save, the users' layout), .safetensors (the embedding columns
as [N, D] tensors) and .npy (one file per embedding column); texts exist only in .pt (and in the
gpucache shards packed from it). A small share of rows is invalid on purpose (norm < 0.1, norm >
100 or a NaN), so every validating path has something to drop.

Values: standard normal / sqrt(D), so norms are close to 1, from a fixed seed. A params.json stamp
records what was generated; a later run with the same parameters reuses the files.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

BAD_EVERY = 1000  # one row in BAD_EVERY is invalid, cycling through the three defects
GENERATOR_VERSION = 2


@dataclass
class DataParams:
    embed_bytes: int        # the big [N, D] embeddings matrix (pack/verify/inspect/load)
    embed_dim: int
    small_bytes: int        # the small embeddings matrix (inspect size comparison)
    dialogue_rows: int
    dialogue_dim: int
    llm_rows: int
    llm_dim: int
    seed: int = 1234
    version: int = GENERATOR_VERSION

    @property
    def embed_rows(self) -> int:
        return max(1, self.embed_bytes // (4 * self.embed_dim))

    @property
    def small_rows(self) -> int:
        return max(1, self.small_bytes // (4 * self.embed_dim))


def _matrix(rows: int, dim: int, generator):
    import torch
    out = torch.empty(rows, dim, dtype=torch.float32)
    step = max(1, (64 << 20) // (4 * dim))  # 64 MiB at a time keeps peak memory low
    for start in range(0, rows, step):
        block = out[start:start + step]
        block.normal_(generator=generator)
        block.mul_(dim ** -0.5)
    _spoil(out)
    return out


def _spoil(matrix, offset: int = 0) -> None:
    """Makes every BAD_EVERY-th row invalid: norm 0.001, norm 1000, or a NaN, in turn."""
    for n, row in enumerate(range(offset % BAD_EVERY + BAD_EVERY // 2, matrix.shape[0], BAD_EVERY)):
        defect = n % 3
        if defect == 0:
            matrix[row].mul_(1e-3)
        elif defect == 1:
            matrix[row].mul_(1e3)
        else:
            matrix[row, 0] = float("nan")


def _save_npy(path: Path, matrix) -> None:
    import numpy as np
    np.save(path, matrix.numpy())


def _save_safetensors(path: Path, tensors: dict, metadata: dict | None = None) -> None:
    from safetensors.torch import save_file
    save_file(tensors, str(path), metadata=metadata)


def generate(out_dir: Path, params: DataParams, log=print) -> dict:
    """Writes every file under out_dir and returns {name: path}. Reuses them when params match."""
    import torch
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = out_dir / "params.json"
    files = file_names(out_dir)
    if stamp.exists() and json.loads(stamp.read_text()) == asdict(params) and all(
            p.exists() for p in files.values()):
        log(f"data: reusing {out_dir} (same parameters)")
        return files
    if stamp.exists():
        stamp.unlink()
    generator = torch.Generator().manual_seed(params.seed)

    log(f"data: embeddings [{params.embed_rows}, {params.embed_dim}] f32 as .npy/.pt/.safetensors")
    emb = _matrix(params.embed_rows, params.embed_dim, generator)
    _save_npy(files["emb.npy"], emb)
    torch.save(emb, files["emb.pt"])
    _save_safetensors(files["emb.safetensors"], {"embedding": emb})
    del emb
    small = _matrix(params.small_rows, params.embed_dim, generator)
    _save_npy(files["small.npy"], small)
    del small

    log(f"data: dialogue {params.dialogue_rows} rows x 2 x {params.dialogue_dim} "
        "as list-of-dicts .pt, .safetensors, .npy")
    q = _matrix(params.dialogue_rows, params.dialogue_dim, generator)
    a = _matrix(params.dialogue_rows, params.dialogue_dim, generator)
    _spoil(a, offset=BAD_EVERY // 4)  # answers fail on other rows than questions
    rows = [{"question": f"question {i}: what is {i} + {i}?",
             "answer": f"answer {i}: {2 * i}",
             "question_embedding": q[i].clone(),
             "answer_embedding": a[i].clone()} for i in range(params.dialogue_rows)]
    torch.save(rows, files["dialogue.pt"])
    del rows
    _save_safetensors(files["dialogue.safetensors"],
                      {"question_embedding": q, "answer_embedding": a})
    _save_npy(files["dialogue-question_embedding.npy"], q)
    _save_npy(files["dialogue-answer_embedding.npy"], a)
    del q, a

    log(f"data: llm cache {params.llm_rows} x {params.llm_dim} as dict text->tensor .pt, "
        ".safetensors, .npy")
    e = _matrix(params.llm_rows, params.llm_dim, generator)
    cache = {f"prompt {i}: summarise document {i * 7919 % 100003}": e[i].clone()
             for i in range(params.llm_rows)}
    torch.save(cache, files["llm_cache.pt"])
    del cache
    _save_safetensors(files["llm_cache.safetensors"], {"embedding": e})
    _save_npy(files["llm_cache.npy"], e)
    del e

    rows = image_rows(params.embed_bytes)
    log(f"data: images [{rows}, {', '.join(map(str, IMAGE_SHAPE))}] u8 as .npy")
    images = torch.randint(0, 256, (rows, *IMAGE_SHAPE), dtype=torch.uint8, generator=generator)
    _save_npy(files["images.npy"], images)
    del images

    stamp.write_text(json.dumps(asdict(params), indent=1) + "\n")
    return files


IMAGE_SHAPE = (3, 224, 224)


def image_rows(total_bytes: int) -> int:
    """Rows of u8 [3, 224, 224] images in about total_bytes (the embeddings' size, 1 GiB)."""
    return max(1, total_bytes // (3 * 224 * 224))


def file_names(out_dir: Path) -> dict:
    names = ["emb.npy", "emb.pt", "emb.safetensors", "small.npy",
             "dialogue.pt", "dialogue.safetensors", "dialogue-question_embedding.npy",
             "dialogue-answer_embedding.npy",
             "llm_cache.pt", "llm_cache.safetensors", "llm_cache.npy", "images.npy"]
    return {name: out_dir / name for name in names}


# Per kind: the files each loader reads, and the numeric bytes they hold.
def kind_files(files: dict) -> dict:
    return {
        "embeddings": {"pt": [files["emb.pt"]], "safetensors": [files["emb.safetensors"]],
                       "npy": [files["emb.npy"]]},
        "dialogue": {"pt": [files["dialogue.pt"]],
                     "safetensors": [files["dialogue.safetensors"]],
                     "npy": [files["dialogue-question_embedding.npy"],
                             files["dialogue-answer_embedding.npy"]]},
        "llm-cache": {"pt": [files["llm_cache.pt"]], "safetensors": [files["llm_cache.safetensors"]],
                      "npy": [files["llm_cache.npy"]]},
    }


def expected_invalid_rows(rows: int, pairs: bool = False) -> int:
    """Rows _spoil makes invalid (both columns for dialogue)."""
    count = len(range(BAD_EVERY // 2, rows, BAD_EVERY))
    if pairs:
        spoiled = set(range(BAD_EVERY // 2, rows, BAD_EVERY))
        spoiled |= set(range(BAD_EVERY // 4 + BAD_EVERY // 2, rows, BAD_EVERY))
        count = len(spoiled)
    return count


def main(argv=None) -> int:
    import sys
    argv = sys.argv[1:] if argv is None else argv
    out_dir, params = Path(argv[0]), DataParams(**json.loads(argv[1]))

    def log(message):
        print(message, file=sys.stderr, flush=True)
    files = generate(out_dir, params, log)
    print(json.dumps({name: str(path) for name, path in files.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
