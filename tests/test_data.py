"""headlab.inputs.data: grade mappings, STS-B loaders on hand-written fixtures, user-file validation, splits."""

import gzip
import json

import pytest

from headlab.core.grades import GradeScale
from headlab.inputs import data
from headlab.inputs.data import (
    STSB_EN_MAPPING,
    STSB_ZH_MAPPING,
    DataError,
    DataWarning,
    class_balance,
    get_split,
    grade_scale,
    load_data,
    load_pairs,
    load_stsb_en,
    load_stsb_zh,
    stsb_grade,
    stsb_zh_grade,
)

HEADER = "query\ttitle\tlabel\n"


def write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def pairs_tsv(n, with_split=False):
    head = "query\ttitle\tlabel" + ("\tsplit" if with_split else "")
    rows = [f"q{i}\tt{i}\t{i % 5 + 1}" + ("\ttest" if with_split else "") for i in range(n)]
    return "\n".join([head, *rows]) + "\n"


def error(path, match_parts, **kwargs):
    """Load ``path``, expect a DataError whose message names the file and every part given."""
    with pytest.raises(DataError) as info:
        load_pairs(path, **kwargs)
    message = str(info.value)
    for part in [path.name, *match_parts]:
        assert part in message, (part, message)
    return message


# --- grade mappings -------------------------------------------------------------------------------


@pytest.mark.parametrize("score, grade", [(0.0, 1), (0.999, 1), (1.0, 2), (2.5, 3), (3.999, 4), (4.0, 5), (5.0, 5)])
def test_stsb_grade_boundaries(score, grade):
    assert stsb_grade(score) == grade


@pytest.mark.parametrize("score", [-0.1, 5.001, float("nan")])
def test_stsb_grade_out_of_range(score):
    with pytest.raises(ValueError):
        stsb_grade(score)


@pytest.mark.parametrize("label, grade", [(0, 1), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), ("0", 1)])
def test_stsb_zh_grade(label, grade):
    assert stsb_zh_grade(label) == grade


@pytest.mark.parametrize("label", [6, -1, "2.5"])
def test_stsb_zh_grade_rejects(label):
    with pytest.raises(DataError):
        stsb_zh_grade(label)


def test_mapping_texts_for_the_book():
    assert "[4,5] -> 5" in STSB_EN_MAPPING and "0 and 1 -> 1" in STSB_ZH_MAPPING


# --- STS-B loaders ---------------------------------------------------------------------------------

STSB_EN = (
    "split\tgenre\tdataset\tyear\tsid\tscore\tsentence1\tsentence2\n"
    "train\tmain-captions\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane is taking off.\n"
    'train\tmain-news\theadlines\t2013\t0002\t0.500\tHe said "yes.\tA "quoted\' title\n'
    "dev\tmain-forums\tdeft\t2014\t0003\t3.999\tOne.\tTwo.\n"
    "test\tmain-news\tanswers\t2015\t0004\t1.000\tThree.\tFour.\tsource note\n"
)


def stsb_en_folder(tmp_path, text=STSB_EN):
    (tmp_path / "stsbenchmark.tsv.gz").write_bytes(gzip.compress(text.encode()))
    return tmp_path


def test_load_stsb_en(tmp_path):
    df = load_stsb_en(stsb_en_folder(tmp_path))
    assert list(df.columns) == ["split", "query", "title", "label", "line"]
    assert df["split"].tolist() == ["train", "train", "dev", "test"]
    assert df["label"].tolist() == [5, 1, 4, 2] and str(df["label"].dtype) == "int64"
    assert df["line"].tolist() == [2, 3, 4, 5]
    assert df.loc[1, "query"] == 'He said "yes.' and df.loc[1, "title"] == "A \"quoted' title"  # quotes kept


def test_load_stsb_en_bad_score(tmp_path):
    folder = stsb_en_folder(tmp_path, STSB_EN.replace("\t3.999\t", "\t7.5\t"))
    with pytest.raises(DataError, match=r"stsbenchmark.tsv.gz, line 4: score '7.5'"):
        load_stsb_en(folder)


def test_load_stsb_en_missing_file(tmp_path):
    with pytest.raises(DataError, match="stsbenchmark.tsv.gz: file not found"):
        load_stsb_en(tmp_path)


def stsb_zh_folder(
    tmp_path, train="一架飞机要起飞了。\t一架飞机正在起飞。\t5\n一个男人在吹笛子。\t一个人在吹长笛。\t0\n"
):
    write(tmp_path, "STS-B.train.data", train)
    write(tmp_path, "STS-B.valid.data", "甲\t乙\t1\n")
    write(tmp_path, "STS-B.test.data", "丙\t丁\t3\n戊\t己\t4\n")
    return tmp_path


def test_load_stsb_zh(tmp_path):
    df = load_stsb_zh(stsb_zh_folder(tmp_path))
    assert df["split"].tolist() == ["train", "train", "dev", "test", "test"]
    assert df["label"].tolist() == [5, 1, 1, 3, 4]
    assert df["line"].tolist() == [1, 2, 1, 1, 2]
    assert df.loc[0, "query"] == "一架飞机要起飞了。"


def test_load_stsb_zh_bad_label(tmp_path):
    folder = stsb_zh_folder(tmp_path, train="甲\t乙\t5\n丙\t丁\t9\n")
    with pytest.raises(DataError, match=r"STS-B.train.data, line 2: .*'9'"):
        load_stsb_zh(folder)


def test_load_data_resolves_assets(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "asset_path", lambda name: stsb_en_folder(tmp_path))
    assert len(load_data("stsb-en")) == 4


# --- user files: happy paths -----------------------------------------------------------------------


def test_tsv_with_split_column(tmp_path):
    path = write(
        tmp_path, "pairs.tsv", "query\ttitle\tlabel\tsplit\n京东小哥\t京东小哥最近在干什么\t4\tTest\nq\tt\t2\tTrain\n"
    )
    df = load_pairs(path)
    assert df.to_dict("records") == [
        {"split": "test", "query": "京东小哥", "title": "京东小哥最近在干什么", "label": 4, "line": 2},
        {"split": "train", "query": "q", "title": "t", "label": 2, "line": 3},
    ]


def test_csv_quoted_fields_and_bom(tmp_path):
    path = write(tmp_path, "pairs.csv", '\ufeffquery,title,label\n"a, b","say ""hi""",3\r\nc,d,5\r\n')
    df = load_pairs(path)
    assert df["query"].tolist() == ["a, b", "c"] and df["title"].tolist() == ['say "hi"', "d"]
    assert df["label"].tolist() == [3, 5] and df["line"].tolist() == [2, 3]


def test_jsonl(tmp_path):
    lines = [
        {"query": "q", "title": "t", "label": 2, "split": "dev"},
        {"query": "r", "title": "u", "label": "5", "split": "train"},
    ]
    path = write(tmp_path, "pairs.jsonl", "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n\n")
    df = load_pairs(path)
    assert df[["split", "label", "line"]].to_dict("list") == {
        "split": ["dev", "train"],
        "label": [2, 5],
        "line": [1, 2],
    }


def test_load_data_user_file(tmp_path):
    path = write(tmp_path, "pairs.tsv", pairs_tsv(20, with_split=True))
    assert len(load_data(str(path))) == 20


def test_split_assignment_is_seeded_and_80_10_10(tmp_path):
    path = write(tmp_path, "pairs.tsv", pairs_tsv(1000))
    a, b, c = load_pairs(path, seed=0), load_pairs(path, seed=0), load_pairs(path, seed=1)
    assert a["split"].tolist() == b["split"].tolist()
    assert a["split"].tolist() != c["split"].tolist()
    assert a["split"].value_counts().to_dict() == {"train": 800, "dev": 100, "test": 100}
    assert a["line"].tolist() == list(range(2, 1002))  # file order kept


def test_duplicates_warn_and_are_kept(tmp_path):
    path = write(tmp_path, "pairs.tsv", HEADER + "q\tt\t3\nq\tt\t3\nq\tt\t3\nq\tt\t4\n")
    with pytest.warns(DataWarning, match=r"pairs.tsv: 2 duplicate"):
        df = load_pairs(path)
    assert len(df) == 4


# --- user files: one test per validation case ------------------------------------------------------


def test_missing_file(tmp_path):
    error(tmp_path / "nope.tsv", ["not found"])


def test_unsupported_extension(tmp_path):
    error(write(tmp_path, "pairs.xlsx", pairs_tsv(3)), ["'.xlsx'", ".jsonl"])


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_empty_file(tmp_path, text):
    error(write(tmp_path, "pairs.tsv", text), ["empty"])


def test_header_only(tmp_path):
    error(write(tmp_path, "pairs.csv", "query,title,label\n"), ["no data rows"])


def test_not_utf8(tmp_path):
    path = write(tmp_path, "pairs.tsv", HEADER + "q\tt\t3\ncafé\tt\t2\n", encoding="latin-1")
    error(path, ["line 3", "0xe9", "UTF-8"])


def test_tsv_that_is_comma_separated(tmp_path):
    error(
        write(tmp_path, "pairs.tsv", "query,title,label\nq,t,3\n"),
        ["line 1", "looks comma-separated", "rename it to .csv"],
    )


def test_csv_that_is_tab_separated(tmp_path):
    error(write(tmp_path, "pairs.csv", pairs_tsv(2)), ["line 1", "looks tab-separated"])


def test_missing_columns(tmp_path):
    error(write(tmp_path, "pairs.csv", "query,text,grade\nq,t,3\n"), ["title, label", "'text'", "'grade'"])


@pytest.mark.parametrize("column, row", [("query", "  \tt\t3"), ("title", "q\t\t3")])
def test_empty_query_or_title(tmp_path, column, row):
    error(write(tmp_path, "pairs.tsv", HEADER + "q\tt\t3\n" + row + "\n"), ["line 3", f"{column} is empty"])


@pytest.mark.parametrize("label", ["3.5", "high", "-1", "11", ""])
def test_bad_label(tmp_path, label):
    error(write(tmp_path, "pairs.tsv", HEADER + f"q\tt\t{label}\n"), ["line 2", f"label {label!r}"])


@pytest.mark.parametrize(
    "labels, scale",
    [
        ((0, 1, 2, 1), GradeScale(0, 3)),
        ((1, 0, 1), GradeScale(0, 2)),
        ((2, 3, 5), GradeScale(1, 5)),
        ((1, 2), GradeScale(1, 2)),
    ],
)
def test_a_file_brings_its_own_grades(tmp_path, labels, scale):
    rows = "".join(f"q{i}\tt{i}\t{label}\n" for i, label in enumerate(labels))
    df = load_pairs(write(tmp_path, "pairs.tsv", HEADER + rows))
    assert grade_scale(df) == scale
    assert class_balance(df)["label"].drop_duplicates().tolist() == list(scale.grades)  # a grade no pair uses: a zero


@pytest.mark.parametrize(
    "labels, message", [((3, 3), "every label is 3"), ((0, 11), "label '11'"), ((1, 10, 0), "11 grades")]
)
def test_labels_that_make_no_scale_name_the_file(tmp_path, labels, message):
    rows = "".join(f"q{i}\tt{i}\t{label}\n" for i, label in enumerate(labels))
    error(write(tmp_path, "pairs.tsv", HEADER + rows), ["pairs.tsv", message])


def test_bad_label_in_jsonl(tmp_path):
    error(write(tmp_path, "pairs.jsonl", '{"query": "q", "title": "t", "label": 3.0}\n'), ["line 1", "label 3.0"])


def test_unknown_split(tmp_path):
    path = write(tmp_path, "pairs.tsv", "query\ttitle\tlabel\tsplit\nq\tt\t3\ttrain\nq\tt\t3\tvalid\n")
    error(path, ["line 3", "'valid'", "train, dev, test"])


def test_malformed_json_line(tmp_path):
    path = write(tmp_path, "pairs.jsonl", '{"query": "q", "title": "t", "label": 3}\n{"query": "q",\n')
    error(path, ["line 2", "malformed JSON"])


def test_jsonl_missing_field(tmp_path):
    error(write(tmp_path, "pairs.jsonl", '{"query": "q", "label": 3}\n'), ["line 1", "title"])


@pytest.mark.parametrize(
    "name, text", [("pairs.tsv", HEADER + "q\tt\t3\nq\tt\n"), ("pairs.csv", "query,title,label\nq,t,3\nq,t,3,extra\n")]
)
def test_wrong_field_count(tmp_path, name, text):
    error(write(tmp_path, name, text), ["line 3", "expected 3 fields", "found"])


def test_line_numbers_count_blank_lines(tmp_path):
    path = write(tmp_path, "pairs.tsv", HEADER + "q\tt\t3\n\nq\tt\tx\n")
    error(path, ["line 4", "label 'x'"])


# --- get_split and class_balance ---------------------------------------------------------------------


@pytest.fixture
def frame(tmp_path):
    return load_pairs(write(tmp_path, "pairs.tsv", pairs_tsv(200)))


def test_get_split(frame):
    test = get_split(frame, "test")
    assert len(test) == 20 and set(test["split"]) == {"test"} and test.index.tolist() == list(range(20))
    assert test["line"].is_monotonic_increasing


def test_get_split_limit_is_seeded_and_ordered(frame):
    a, b, c = (get_split(frame, "train", limit=10, seed=s) for s in (0, 0, 1))
    assert a.equals(b) and not a.equals(c)
    assert len(a) == 10 and a["line"].is_monotonic_increasing and a.index.tolist() == list(range(10))
    assert len(get_split(frame, "dev", limit=10_000)) == 20


def test_get_split_empty_split(tmp_path):
    df = load_pairs(write(tmp_path, "pairs.tsv", pairs_tsv(3, with_split=True)))
    with pytest.raises(DataError, match=r"'dev' has no rows.*\['test'\]"):
        get_split(df, "dev")


@pytest.mark.parametrize("limit", [0, -1, 2.5, True, "10"])
def test_get_split_bad_limit(frame, limit):
    with pytest.raises(DataError, match="limit"):
        get_split(frame, "train", limit=limit)


def test_class_balance(tmp_path):
    df = load_pairs(
        write(
            tmp_path,
            "pairs.tsv",
            "query\ttitle\tlabel\tsplit\na\tb\t1\ttrain\nc\td\t1\ttrain\ne\tf\t5\ttrain\ng\th\t2\ttest\n",
        )
    )
    out = class_balance(df)
    assert list(out.columns) == ["split", "label", "count", "share"] and len(out) == 10
    train = out[out["split"] == "train"].set_index("label")
    assert train["count"].tolist() == [2, 0, 0, 0, 1]
    assert train.loc[1, "share"] == pytest.approx(2 / 3)
    assert out.groupby("split")["share"].sum().tolist() == pytest.approx([1.0, 1.0])
