import pytest

from headlab.inputs.pku import held_out_sentences, held_out_split, read_pku


def test_read_pku_real_format(tmp_path):
    path = tmp_path / "199801.txt"
    path.write_text(
        "19980101-01-001-001/m  迈向/v  充满/v  希望/v  的/u  新/a  世纪/n  ——/w  一九九八年/t\n"
        "\n"
        "19980101-01-001-002/m  我/r  通过/p  [中央/n  人民/n  广播/vn  电台/n]nt  ，/w  说/v  “/w  好/a  。/w  ”/w  "
        "１/２/m  年/q  ！/w\n",
        encoding="utf-8",
    )
    sentences = read_pku(path)
    assert sentences == [
        ["迈向", "充满", "希望", "的", "新", "世纪", "——", "一九九八年"],
        ["我", "通过", "中央", "人民", "广播", "电台", "，", "说", "“", "好", "。", "”"],
        ["１/２", "年", "！"],
    ]
    assert read_pku(path, limit_sentences=2) == sentences[:2]
    assert len(read_pku(path, split_sentences=False)) == 2


def test_held_out_split_is_deterministic_and_disjoint():
    sentences = [[f"词{i}", "的", f"{i % 7}"] for i in range(400)] + [["重复"]] * 5
    train, held = held_out_split(sentences, 0.2, seed=3)
    assert sorted(map(tuple, held)) == sorted(map(tuple, held_out_split(sentences[::-1], 0.2, seed=3)[1]))
    train2, held2 = held_out_split(sentences, 0.2, seed=3)
    assert train == train2 and held == held2
    assert len(train) + len(held) == len(sentences)
    assert not {"".join(s) for s in train} & {"".join(s) for s in held}
    assert 40 < len(held) < 120
    assert held_out_split(sentences, 0.2, seed=4)[1] != held


@pytest.mark.slow  # reads the pku-1998 asset
def test_held_out_sentences_from_the_asset():
    first = held_out_sentences(limit=5, seed=0)
    assert len(first) == 5 and all(isinstance(w, str) and w for s in first for w in s)
    assert held_out_sentences(limit=5, seed=0) == first
    assert held_out_sentences(limit=5, seed=1) != first
