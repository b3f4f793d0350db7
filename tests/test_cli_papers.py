"""`rag papers` end to end (the real CLI over the ingested seeds): --limit, --offset, --grep."""

from __future__ import annotations

import re

import pytest

from tests.test_cli import rag


@pytest.fixture(scope="module")
def listing(settings) -> list[str]:
    res = rag(["papers"], settings.paths.data)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_default_lists_every_paper_in_id_order(listing) -> None:
    assert len(listing) == 57  # the seed corpus, unchanged by the paging options
    assert all(re.fullmatch(r"\d{3}-\d{2}  \S.*", line) for line in listing)
    ids = [line.split()[0] for line in listing]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_limit_and_offset_page_the_listing(settings, listing) -> None:
    data = settings.paths.data
    res = rag(["papers", "--offset", "10", "--limit", "3"], data)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == listing[10:13]
    res = rag(["papers", "--limit", "5"], data)
    assert res.stdout.splitlines() == listing[:5]
    res = rag(["papers", "--offset", "55"], data)
    assert res.stdout.splitlines() == listing[55:]
    res = rag(["papers", "--offset", "500"], data)
    assert res.returncode == 0 and res.stdout == ""


def test_grep_filters_before_paging(settings, listing) -> None:
    data = settings.paths.data
    res = rag(["papers", "--grep", "ssl4rl"], data)  # case-insensitive, on id/label/title
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [x for x in listing if "ssl4rl" in x.lower()] != []
    res = rag(["papers", "--grep", "003-", "--offset", "1", "--limit", "2"], data)
    assert res.stdout.splitlines() == [x for x in listing if x.startswith("003-")][1:3]


@pytest.mark.parametrize("args,expected", [
    (["--limit", "0"], "error: argument --limit: must be > 0, got 0"),
    (["--offset", "-1"], "error: argument --offset: must be >= 0, got -1"),
    (["--offset", "x"], "error: argument --offset: 'x' is not a whole number"),
])
def test_bad_paging_arguments_are_one_line(settings, args, expected) -> None:
    res = rag(["papers", *args], settings.paths.data)
    assert res.returncode == 2 and res.stderr.startswith(expected), res.stderr
