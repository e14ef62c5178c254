"""Relevance pairs (query, title, grade) from STS-B (grades 1-5) or a user's file (its own scale).

Every loader returns the same frame: ``split, query, title, label, line`` in file order, where ``line`` is
the 1-based line in the source file (header = line 1), so any row can be traced back to its origin; its grade scale
is :func:`grade_scale`'s, read from every label of the file. Bad
input raises :class:`DataError` naming the file, the line and what was expected, never a parser traceback.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.core.grades import MOST, GradeError, GradeScale
from headlab.inputs.assets import asset_path

SPLITS = ("train", "dev", "test")
COLUMNS = ["split", "query", "title", "label", "line"]
REQUIRED = ("query", "title", "label")

STSB_EN_MAPPING = (
    "English STS-B similarity score (0-5, real) -> grade: [0,1) -> 1, [1,2) -> 2, [2,3) -> 3, [3,4) -> 4, [4,5] -> 5."
)
STSB_ZH_MAPPING = (
    "Chinese STS-B label (0-5, integer) -> grade: 0 and 1 -> 1 (both mean unrelated, "
    "different topic), 2 -> 2, 3 -> 3, 4 -> 4, 5 -> 5."
)


class DataError(ValueError):
    """Input that cannot become relevance pairs; the message says where and what was expected."""


class DataWarning(UserWarning):
    """Input that loads but deserves a look (duplicate rows)."""


def _fail(path, what: str, line: int | None = None):
    where = f"{path}, line {line}" if line else str(path)
    raise DataError(f"{where}: {what}")


def stsb_grade(score: float) -> int:
    """English STS-B score -> grade, one grade per unit of score (see STSB_EN_MAPPING)."""
    if not 0 <= score <= 5:  # also rejects NaN
        raise DataError(f"STS-B score {score!r} outside the expected range 0-5")
    return min(int(score), 4) + 1


def stsb_zh_grade(label: int | str) -> int:
    """Chinese STS-B label -> grade; 0 and 1 merge so five grades remain (see STSB_ZH_MAPPING)."""
    if _as_int(label) not in range(6):
        raise DataError(f"Chinese STS-B label {label!r} is not an integer 0-5")
    return max(int(label), 1)


def _as_int(value) -> int | None:
    """Integer value of an int or an integer string ("3"), else None: "3.5", "high" and True are not grades."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _read_text(path: Path) -> str:
    """File text, UTF-8 with an optional BOM; a bad byte is reported with its line."""
    if not path.is_file():
        _fail(path, "file not found")
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as err:
        _fail(path, f"cannot read the file ({err})")
    raw = raw.removeprefix(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        _fail(
            path, f"byte 0x{raw[err.start]:02x} is not UTF-8; expected a UTF-8 file", raw.count(b"\n", 0, err.start) + 1
        )


def _rows(path: Path, text: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """Non-blank records with the line each starts on; TSV takes quotes literally (STS-B has stray ones)."""
    kind, quoting = ("TSV", csv.QUOTE_NONE) if delimiter == "\t" else ("CSV", csv.QUOTE_MINIMAL)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting, strict=True)
    rows, start = [], 1
    try:
        for fields in reader:
            if fields:
                rows.append((start, fields))
            start = reader.line_num + 1
    except csv.Error as err:
        _fail(path, f"malformed {kind} ({err})", reader.line_num)
    return rows


def _text(path, line: int, column: str, value) -> str:
    if not isinstance(value, str) or not value.strip():
        _fail(path, f"{column} is empty or not text; expected non-empty text", line)
    return value.strip()


def _split(path, line: int, value) -> str:
    if value not in SPLITS:
        _fail(path, f"unknown split {value!r}; expected one of {', '.join(SPLITS)}", line)
    return value


def _frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS).astype({"label": "int64", "line": "int64"})


def load_stsb_en(folder) -> pd.DataFrame:
    """English STS-B (stsbenchmark.tsv.gz): sentence1 -> query, sentence2 -> title, score -> grade."""
    path = Path(folder) / "stsbenchmark.tsv.gz"
    rows = _rows(path, _read_text(path), "\t")
    header = rows[0][1] if rows else []
    missing = [c for c in ("split", "score", "sentence1", "sentence2") if c not in header]
    if missing:
        _fail(path, f"header lacks {missing}; found {header}", 1)
    at = {c: header.index(c) for c in header}
    out = []
    for line, f in rows[1:]:
        if len(f) < len(header):  # the original release appends source notes to a few rows: extras are ignored
            _fail(path, f"expected {len(header)} tab-separated fields, found {len(f)}", line)
        try:
            grade = stsb_grade(float(f[at["score"]]))
        except ValueError:  # not a number, or outside 0-5
            _fail(path, f"score {f[at['score']]!r}: expected a number 0-5", line)
        out.append(
            (
                _split(path, line, f[at["split"]]),
                _text(path, line, "sentence1", f[at["sentence1"]]),
                _text(path, line, "sentence2", f[at["sentence2"]]),
                grade,
                line,
            )
        )
    return _frame(out)


def load_stsb_zh(folder) -> pd.DataFrame:
    """Chinese STS-B (STS-B.{train,valid,test}.data, no header): valid becomes dev; ``line`` is per file."""
    out = []
    for split, name in (("train", "train"), ("dev", "valid"), ("test", "test")):
        path = Path(folder) / f"STS-B.{name}.data"
        for line, f in _rows(path, _read_text(path), "\t"):
            if len(f) != 3:
                _fail(path, f"expected 3 tab-separated fields (sentence1, sentence2, label), found {len(f)}", line)
            try:
                grade = stsb_zh_grade(f[2])
            except DataError as err:
                _fail(path, str(err), line)
            out.append((split, _text(path, line, "sentence1", f[0]), _text(path, line, "sentence2", f[1]), grade, line))
    return _frame(out)


def _table_records(path: Path, text: str) -> list[tuple[int, dict]]:
    if path.suffix.lower() == ".tsv":
        delimiter, other, names = "\t", ",", ("tabs", "comma", ".csv")
    else:
        delimiter, other, names = ",", "\t", ("commas", "tab", ".tsv")
    rows = _rows(path, text, delimiter)
    header = [h.strip().lower() for h in rows[0][1]] if rows else []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        if set(REQUIRED) <= {h.strip().lower() for h in text.split("\n", 1)[0].split(other)}:
            _fail(
                path,
                f"header looks {names[1]}-separated; a {path.suffix} file must use {names[0]} "
                f"(or rename it to {names[2]})",
                1,
            )
        _fail(
            path,
            f"missing column(s) {', '.join(missing)}; found {header}; "
            "expected query, title, label and optionally split",
            1,
        )
    for line, fields in rows[1:]:
        if len(fields) != len(header):
            _fail(path, f"expected {len(header)} fields like the header, found {len(fields)}", line)
    return [(line, dict(zip(header, fields))) for line, fields in rows[1:]]


def _jsonl_records(path: Path, text: str) -> list[tuple[int, dict]]:
    records = []
    for line, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            _fail(path, f"malformed JSON ({err.msg}); expected one JSON object per line", line)
        missing = [c for c in REQUIRED if c not in obj] if isinstance(obj, dict) else list(REQUIRED)
        if missing:
            _fail(path, f"missing field(s) {', '.join(missing)}; expected an object with query, title, label", line)
        records.append((line, obj))
    return records


def load_pairs(path, seed: int = 0) -> pd.DataFrame:
    """A user's .tsv/.csv/.jsonl of query, title, label (a whole grade, numbered from 0 or 1: :func:`grade_scale`)
    and optional split, fully validated.

    Without a split column the rows get a seeded 80/10/10 train/dev/test split, so reruns see the same test set.
    """
    path = Path(path)
    if path.suffix.lower() not in (".tsv", ".csv", ".jsonl"):
        _fail(path, f"unsupported file type {path.suffix!r}; expected .tsv, .csv or .jsonl")
    text = _read_text(path)
    if not text.strip():
        _fail(path, "file is empty; expected query, title, label rows")
    records = (_jsonl_records if path.suffix.lower() == ".jsonl" else _table_records)(path, text)
    if not records:
        _fail(path, "no data rows after the header; expected query, title, label rows")
    has_split = "split" in records[0][1]
    out = []
    for line, rec in records:
        label = _as_int(rec["label"])
        if label is None or not 0 <= label <= MOST:
            _fail(path, f"label {rec['label']!r} is not a whole grade from 0 to {MOST}", line)
        split = _split(path, line, str(rec.get("split")).strip().lower()) if has_split else None
        out.append(
            (split, _text(path, line, "query", rec["query"]), _text(path, line, "title", rec["title"]), label, line)
        )
    df = _frame(out)
    try:
        GradeScale.of_labels(df["label"], where=str(path))
    except GradeError as err:
        raise DataError(str(err)) from None
    # Before assigning splits, so the same pair landing in train and test is counted too.
    duplicates = int(df.duplicated(["split", "query", "title", "label"]).sum())
    if duplicates:
        warnings.warn(
            f"{path}: {duplicates} duplicate row(s) (same query, title, label, split); kept", DataWarning, stacklevel=2
        )
    if not has_split:
        n = len(df)
        n_train, n_dev = round(0.8 * n), round(0.1 * n)
        split = np.empty(n, dtype=object)
        split[np.random.default_rng(seed).permutation(n)] = (
            ["train"] * n_train + ["dev"] * n_dev + ["test"] * (n - n_train - n_dev)
        )
        df["split"] = split.astype(str)
    return df


def load_data(spec: str, seed: int = 0) -> pd.DataFrame:
    """``"stsb-en"`` or ``"stsb-zh"`` (from the downloaded assets), else the path of a user's file."""
    loaders = {"stsb-en": load_stsb_en, "stsb-zh": load_stsb_zh}
    if spec in loaders:
        return loaders[spec](asset_path(spec))
    return load_pairs(spec, seed=seed)


def get_split(df: pd.DataFrame, split: str, limit: int | None = None, seed: int = 0) -> pd.DataFrame:
    """Rows of one split in file order; ``limit`` keeps a seeded random subset so quick runs stay comparable."""
    rows = df[df["split"] == split]
    if rows.empty:
        raise DataError(f"split {split!r} has no rows; splits present: {sorted(df['split'].unique())}")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
            raise DataError(f"limit must be a positive integer or None, got {limit!r}")
        if limit < len(rows):
            rows = rows.iloc[np.sort(np.random.default_rng(seed).choice(len(rows), limit, replace=False))]
    return rows.reset_index(drop=True)


def grade_scale(df: pd.DataFrame) -> GradeScale:
    """The grades of a loaded file (every split's labels: a grade only the test split uses is still a class)."""
    return GradeScale.of_labels(df["label"])


def class_balance(df: pd.DataFrame) -> pd.DataFrame:
    """Tidy count and share of each grade per split (zeros included), e.g. to judge the majority-class baseline."""
    present = [s for s in SPLITS if s in set(df["split"])]
    grid = pd.MultiIndex.from_product([present, grade_scale(df).grades], names=["split", "label"])
    out = df.groupby(["split", "label"]).size().reindex(grid, fill_value=0).rename("count").reset_index()
    out["share"] = out["count"] / out.groupby("split")["count"].transform("sum")
    return out


def grade_mapping(spec: str) -> str:
    """How the labels of a data spec became grades, in words for the book."""
    return {"stsb-en": STSB_EN_MAPPING, "stsb-zh": STSB_ZH_MAPPING}.get(
        spec, f"{spec}: labels are the grades as given in the file"
    )
