"""Seed parsing: ids, labels, cleaning, links, and clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.config import ROOT
from rag.corpus import clean_text, load_corpus, load_file
from rag.errors import CorpusError

SEEDS = ROOT / "seeds"


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(SEEDS)


def test_all_57_papers_with_the_documented_ids(corpus):
    ids = [p.id for p in corpus.papers]
    assert len(ids) == 57 == len(set(ids))
    assert ids[0] == "000-01" and ids[-1] == "004-19"
    assert {i.split("-")[0] for i in ids} == {"000", "003", "004"}
    assert corpus.warnings == ()


def test_first_abstract_of_each_file(corpus):
    by = corpus.by_id()
    assert "SSL4RL" in by["000-01"].text
    assert by["003-01"].clean.startswith("Early exit neural networks")
    assert by["004-01"].collection == "ICML 2026 论文列表"
    assert by["004-19"].source == "004_f66ba659afdb973a.txt"


def test_labels_are_short_readable_and_name_the_method(corpus):
    ref = json.loads((ROOT / "eval" / "labels.json").read_text())
    by = corpus.by_id()
    for p in corpus.papers:
        assert 1 <= len(p.label.split()) <= 8, (p.id, p.label)
        assert "*" not in p.label and "$" not in p.label and "\\" not in p.label, p.label
    for known in [("000-01", "SSL4RL"), ("003-01", "BEXA"), ("003-03", "SVOO"),
                  ("003-06", "PaperGuard"), ("003-19", "OGPO"), ("003-14", "TaRO")]:
        assert by[known[0]].label == known[1]
    names = {pid: r for pid, r in ref.items() if r["kind"] == "name"}
    agree = [pid for pid, r in names.items()
             if by[pid].label.lower() in {r["label"].lower(), *map(str.lower, r.get("aliases", []))}]
    assert len(agree) / len(names) >= 0.85, sorted(set(names) - set(agree))


def test_labels_are_distinct(corpus):
    labels = [p.label.lower() for p in corpus.papers]
    assert len(set(labels)) == len(labels)


def test_cleaning_removes_markup_but_keeps_words_and_numbers():
    raw = r"we propose **SVOO**, \emph{fast} with $\tau \mapsto \rho(\tau)$ and ``Model-X'' at 1.93$\times$"
    out = clean_text(raw)
    for noise in ("**", "\\emph", "$", "``"):
        assert noise not in out
    assert "SVOO" in out and "fast" in out and "1.93" in out and '"Model-X"' in out


def test_code_links_are_kept_as_metadata(corpus):
    by = corpus.by_id()
    assert by["000-01"].links[0] == "https://github.com/PKU-ML/SSL4RL"
    assert all(not link.endswith(".") for p in corpus.papers for link in p.links)


def _write(tmp: Path, name: str, data: bytes) -> Path:
    d = tmp / "seeds"
    d.mkdir(exist_ok=True)
    (d / name).write_bytes(data)
    return d


ABSTRACT = ("We study a problem in depth and propose a new method called TestNet that solves it "
            "with care. Experiments on three benchmarks show that TestNet improves accuracy by "
            "4.2 points over strong baselines while using half the compute of prior work.")


def test_non_utf8_file_names_file_and_line(tmp_path):
    d = _write(tmp_path, "007_bad.txt", b"ICML 2026 Papers\n\n" + ABSTRACT.encode() +
               b"\n\nabc \xff\xfe def\n")
    with pytest.raises(CorpusError, match=r"007_bad.txt: line 5: not UTF-8"):
        load_corpus(d)


def test_empty_file_is_refused(tmp_path):
    d = _write(tmp_path, "008_empty.txt", b"\n\n")
    with pytest.raises(CorpusError, match="008_empty.txt: line 1: the file is empty"):
        load_corpus(d)


def test_header_without_abstracts_is_refused(tmp_path):
    d = _write(tmp_path, "009_head.txt", b"ICML 2026 Papers\n\n")
    with pytest.raises(CorpusError, match="no abstracts"):
        load_corpus(d)


def test_duplicate_and_stray_paragraphs_are_skipped_with_warnings(tmp_path):
    other = ABSTRACT.replace("TestNet", "OtherNet")
    text = f"ICML 2026 Papers\n\n{ABSTRACT}\n\nOops.\n\n{ABSTRACT}\n\n{other}\n"
    d = _write(tmp_path, "012_dups.txt", text.encode())
    papers, warnings = load_file(d / "012_dups.txt")
    assert [p.id for p in papers] == ["012-01", "012-02"]
    assert papers[1].label == "OtherNet" and papers[1].line == 9
    assert any("line 5" in w and "too short" in w for w in warnings)
    assert any("line 7" in w and "repeat of paper 012-01" in w for w in warnings)


def test_file_without_leading_digits_uses_its_stem(tmp_path):
    d = _write(tmp_path, "extra.txt", f"Header\n\n{ABSTRACT}\n".encode())
    assert load_corpus(d).papers[0].id == "extra-01"


def test_header_glued_to_first_abstract(tmp_path):
    d = _write(tmp_path, "013_glued.txt", f"ICML 2026 Papers\n{ABSTRACT}\n".encode())
    p = load_corpus(d).papers[0]
    assert p.collection == "ICML 2026 Papers" and p.text.startswith("We study")
