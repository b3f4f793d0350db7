"""Renderers: escaping, linked markers, highlights, comparison table, abstention (no gradio)."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

from rag.types import (
    Answer,
    AnswerSentence,
    Cell,
    Chunk,
    Citation,
    Comparison,
    ComparisonRow,
    Hit,
    Paper,
    Side,
)
from ui import render
from ui.compare_render import comparison_html

EVIL = "<script>alert('x')</script>"


def paper(pid: str, label: str, clean: str, links: tuple[str, ...] = ()) -> Paper:
    return Paper(id=pid, label=label, text=clean, clean=clean, source=f"{pid[:3]}_seed.txt",
                 position=int(pid[-2:]), line=3, collection="ICML 2026 Papers", links=links)


P1 = paper("000-01", "SSL4RL",
           "VLMs rely on text. We propose SSL4RL, which uses self-supervised tasks as rewards. "
           "Experiments show gains on vision benchmarks.",
           ("https://github.com/PKU-ML/SSL4RL", "javascript:alert(1)"))
P2 = paper("003-14", "TaRO", "TaRO aligns tables. It is evaluated on five datasets.")
PAPERS = {p.id: p for p in (P1, P2)}


def cite(p: Paper, quote: str, marker: int = 1, supported: bool = True) -> Citation:
    start = p.clean.index(quote)
    return Citation(marker=marker, paper_id=p.id, label=p.label, chunk_id=f"{p.id}#1",
                    quote=quote, start=start, end=start + len(quote), supported=supported)


Q1 = "We propose SSL4RL, which uses self-supervised tasks as rewards."
C1 = cite(P1, Q1)


def answer(**kw: object) -> Answer:
    base: dict[str, object] = dict(question="What does SSL4RL use?", text="", citations=(),
                                   hits=(), abstained=False)
    base.update(kw)
    return Answer(**base)  # type: ignore[arg-type]


def test_render_does_not_import_gradio() -> None:
    code = ("import sys, ui.render, ui.compare_render, ui.session; "
            "assert 'gradio' not in sys.modules, 'gradio imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_markers_become_links_to_scoped_anchors() -> None:
    a = answer(text="SSL4RL uses self-supervised tasks as rewards [1].", citations=(C1,))
    out = render.answer_html(a, "2", PAPERS)
    assert '<a class="cite" href="#src-2-1"' in out
    assert "\n" not in out  # one line: Markdown passes it through as HTML


def test_unverified_marker_stays_plain_text() -> None:
    a = answer(text="Claim [1] and stray [7].", citations=(C1,))
    out = render.answer_body_html(a, "1")
    assert 'href="#src-1-1"' in out and "#src-1-7" not in out and "[7]" in out


def test_grouped_markers_split_into_links() -> None:
    c2 = cite(P2, "TaRO aligns tables.", marker=2)
    out = render.answer_body_html(answer(text="Both [1, 2].", citations=(C1, c2)), "1")
    assert 'href="#src-1-1"' in out and 'href="#src-1-2"' in out


def test_unsupported_sentence_is_marked() -> None:
    text = "SSL4RL uses SSL rewards [1]. It also cures cancer."
    a = answer(text=text, citations=(C1,), sentences=(
        AnswerSentence("SSL4RL uses SSL rewards [1].", (1,), True),
        AnswerSentence("It also cures cancer.", (), False)))
    out = render.answer_body_html(a, "1")
    m = re.search(r'<span class="unsupported" title="([^"]*)"[^>]*>([^<]*)</span>', out)
    assert m and "unsupported" in m.group(1) and m.group(2) == "It also cures cancer."
    assert out.count("unsupported\"") == 1  # the supported sentence is not wrapped


def test_everything_is_escaped() -> None:
    bad = paper("000-09", EVIL, f"An abstract with {EVIL} inside. Second sentence.",
                (f"https://x.org/{EVIL}",))
    c = Citation(1, bad.id, bad.label, "c", f"An abstract with {EVIL} inside.", 0,
                 len(f"An abstract with {EVIL} inside."), True)
    a = answer(question=EVIL, text=f"{EVIL} [1]", citations=(c,),
               hits=(Hit(Chunk("c", bad.id, 1, EVIL, 0, 5), 1.0, 1, label=EVIL),))
    papers = {bad.id: bad}
    outputs = [render.answer_html(a, "1", papers), render.sources_html(a, papers, "1"),
               render.retrieved_html(a.hits, [bad]), render.user_html(EVIL),
               render.streaming_html(EVIL), render.error_html(EVIL),
               render.status_html("writing", 3, EVIL), render.paper_card_html(bad),
               render.abstention_html(answer(abstained=True, text=EVIL, reason=EVIL,
                                             closest=(bad.id,)), papers)]
    for out in outputs:
        assert "<script>" not in out, out
        assert "&lt;script&gt;" in out


def test_unsafe_links_dropped_code_links_kept() -> None:
    out = render.links_html(P1.links)
    assert 'href="https://github.com/PKU-ML/SSL4RL"' in out and "code:" in out
    assert "javascript:" not in out


def test_sources_panel_highlights_quote_with_offsets() -> None:
    a = answer(text="Rewards [1].", citations=(C1,))
    out = render.sources_html(a, PAPERS, "4")
    assert 'id="src-4-1"' in out and 'data-paper="000-01"' in out
    assert re.search(r"<mark[^>]*>" + re.escape(Q1) + "</mark>", out)
    assert "000_seed.txt" in out and "github.com/PKU-ML/SSL4RL" in out
    assert "Experiments show gains on vision benchmarks." in out  # full abstract shown


def test_highlight_falls_back_to_search_when_offsets_are_stale() -> None:
    stale = Citation(1, P1.id, P1.label, "c", Q1, 0, 5, True)
    assert f"<mark title=\"supports [1]\">{render.esc(Q1)}</mark>" in render.highlight(
        P1.clean, [stale])


def test_highlight_merges_overlaps_and_escapes() -> None:
    clean = "a < b. b & c. d."
    cs = [Citation(1, "x", "", "", "a < b.", 0, 6, True),
          Citation(2, "x", "", "", "< b. b & c.", 2, 13, True)]
    out = render.highlight(clean, cs)
    assert out.count("<mark") == 1 and "&lt;" in out and "&amp;" in out


def test_two_citations_same_paper_one_card() -> None:
    c2 = cite(P1, "Experiments show gains on vision benchmarks.")
    out = render.sources_html(answer(text="x [1]", citations=(C1, c2)), PAPERS, "1")
    assert out.count('class="src"') == 1 and out.count("<mark") == 2


def test_uncited_hits_listed_compactly() -> None:
    hits = (Hit(Chunk("000-01#1", "000-01", 1, Q1, 0, 10), 0.9, 1),
            Hit(Chunk("003-14#0", "003-14", 0, P2.clean, 0, 10), 0.5, 2))
    out = render.sources_html(answer(text="x [1]", citations=(C1,), hits=hits), PAPERS, "1")
    assert "Also retrieved" in out and 'data-paper="003-14"' in out


def test_retrieved_list_groups_by_paper_and_keeps_rank_order() -> None:
    hits = (Hit(Chunk("003-14#0", "003-14", 0, P2.clean, 0, 1), 0.5, 2),
            Hit(Chunk("000-01#1", "000-01", 1, Q1, 0, 1), 0.9, 1),
            Hit(Chunk("000-01#2", "000-01", 2, "other", 0, 1), 0.4, 3))
    out = render.retrieved_html(hits, [P1, P2])
    assert out.count("<li") == 2 and out.index("000-01") < out.index("003-14")


def test_abstention_lists_closest_papers() -> None:
    a = answer(abstained=True, reason="off-topic", text="I cannot answer that.",
               closest=("000-01", "003-14"))
    chat = render.answer_html(a, "1", PAPERS)
    assert "No answer from the abstracts" in chat and "does not match" in chat
    assert "SSL4RL" in chat and "003-14" in chat
    panel = render.sources_html(a, PAPERS, "1")
    assert "Closest papers" in panel and panel.count('class="src"') == 2


def test_a_missing_code_link_is_said_in_the_abstention_s_head() -> None:
    """"Where is X's code?" with no link: the head says so, not the generic "do not state"."""
    a = answer(abstained=True, reason="not-stated", message="no-link",
               text="The abstract of SSL4RL (000-01) gives no link to its code or project page.")
    chat = render.answer_html(a, "1", PAPERS)
    assert "the abstract gives no link to its code" in chat and "do not state" not in chat


def comparison() -> Comparison:
    l1 = cite(P1, Q1, marker=1)
    r1 = cite(P2, "TaRO aligns tables.", marker=2)
    r2 = cite(P2, "It is evaluated on five datasets.", marker=2)
    rows = (ComparisonRow("Problem", Cell("VLMs rely on text", l1), Cell("table alignment", r1)),
            ComparisonRow("Evaluation", Cell("vision benchmarks", l1), Cell("5 datasets", r2)),
            ComparisonRow("Code", Cell("github.com/PKU-ML/SSL4RL", l1),
                          Cell("not stated in the abstract", None)))
    return Comparison(Side("SSL4RL", "resolved", P1), Side("TaRO", "resolved", P2), rows)


def test_comparison_table_headers_cells_and_missing() -> None:
    out = comparison_html(comparison(), "cmp")
    heads = re.findall(r'<th data-paper="([^"]+)">', out)
    assert heads == ["000-01", "003-14"]
    assert [a for a in re.findall(r'<th class="aspect" scope="row">([^<]*)</th>', out)] == [
        "Problem", "Evaluation", "Code"]
    assert 'href="#src-cmp-2"' in out and 'href="#src-cmp-1"' in out
    assert re.search(r'<td class="missing"[^>]*>not stated in the abstract</td>', out)


def test_comparison_answer_bubble_and_sources() -> None:
    c = comparison()
    a = answer(text="SSL4RL targets VLMs [1]; TaRO targets tables [2].", comparison=c,
               citations=())
    chat = render.answer_html(a, "3", PAPERS)
    assert "compare-table" in chat and "synthesis" in chat and "\n" not in chat
    panel = render.sources_html(a, PAPERS, "3")
    assert 'id="src-3-1"' in panel and 'id="src-3-2"' in panel
    assert panel.count("<mark") == 3


def test_comparison_failure_explains_sides() -> None:
    c = Comparison(Side("XYZ", "unknown"), Side("RL", "ambiguous", candidates=(P1, P2)),
                   message="'XYZ' is not in the corpus")
    out = comparison_html(c, "1")
    assert "not in the corpus" in out and "matches no paper" in out and "003-14" in out


def test_comparison_escapes_cells() -> None:
    c = Comparison(Side(EVIL, "resolved", P1), Side("b", "resolved", P2),
                   (ComparisonRow(EVIL, Cell(EVIL, C1), Cell(EVIL, None)),))
    out = comparison_html(c, "1")
    assert "<script>" not in out and out.count("&lt;script&gt;") == 3


def test_status_line() -> None:
    assert "Searching the abstracts… 3 s" in render.status_html("searching", 3.2)
    assert "Writing the answer… 12 s" in render.status_html("writing", 12)
    assert render.status_html("") == '<div class="status idle"></div>'
    done = render.done_status_html(answer(seconds=23.4, first_token_seconds=9.0,
                                          citations=(C1,)))
    assert "23.4 s" in done and "9.0 s" in done and "1 cited paper" in done


def test_streaming_bubble_is_escaped_text_with_cursor() -> None:
    out = render.streaming_html("a [1] *b*\nc")
    assert "<a " not in out and "<br>" in out and "▍" in out and "\n" not in out


def test_paper_rows_filter_and_first_sentence() -> None:
    rows = render.paper_rows([P1, P2])
    assert rows[0] == ["000-01", "SSL4RL", "VLMs rely on text."]
    assert [r[0] for r in render.paper_rows([P1, P2], "taro datasets")] == ["003-14"]
    assert [r[0] for r in render.paper_rows([P1, P2], "000-01")] == ["000-01"]
    assert render.paper_rows([P1, P2], "nothing-like-this") == []
    assert render.paper_choices([P1]) == [("000-01 · SSL4RL", "000-01")]
    assert "SSL4RL" in render.ask_about(P1)


# ---- titles, related papers, the map, exports (issue 13) ---------------------------------------

from tests.ui_fakes import BY_ID as PAPERS_BY  # noqa: E402


def _titled_paper() -> Paper:
    from dataclasses import replace

    return replace(PAPERS_BY["000-01"], title="SSL4RL: self-supervised tasks as <RL> rewards",
                   title_generated=True)


def test_generated_title_is_shown_marked_with_the_label_on_hover() -> None:
    p = _titled_paper()
    card = render.paper_card_html(p, related=[PAPERS_BY["003-14"]])
    assert "SSL4RL: self-supervised tasks as &lt;RL&gt; rewards" in card
    assert 'class="gen"' in card and "label: SSL4RL" in card
    assert 'class="open-paper" href="#paper-003-14" data-paper="003-14"' in card
    assert render.paper_title(p) == "000-01 · SSL4RL: self-supervised tasks as <RL> rewards"
    plain = PAPERS_BY["003-14"]
    assert 'class="gen"' not in render.paper_card_html(plain)
    assert render.paper_rows([p], "rewards")[0][1].endswith(" ✦")


def test_exports_name_papers_by_title(tmp_path: Any) -> None:
    from ui.session import export_conversation

    p = _titled_paper()
    answer = Answer("q?", "It uses SSL [1].", (Citation(1, p.id, p.label, "000-01#1",
                                                        "We propose SSL4RL", 0, 5, True),),
                    (), False)
    text = export_conversation([answer], {p.id: p}).read_text(encoding="utf-8")
    assert "SSL4RL: self-supervised tasks as <RL> rewards (SSL4RL; generated title)" in text


def test_exports_share_one_process_folder_and_old_ones_are_pruned(tmp_path: Any) -> None:
    import os
    import time

    from ui.session import EXPORT_MAX_AGE_SECONDS, prune_exports, write_export

    first, second = write_export("# a", "a.md"), write_export("# b", "b.md")
    assert first.parent != second.parent and first.parent.parent == second.parent.parent
    assert first.read_text(encoding="utf-8") == "# a"  # one folder per export, one root
    old, new = tmp_path / "export-old", tmp_path / "export-new"
    for folder in (old, new):
        folder.mkdir()
        (folder / "c.md").write_text("x", encoding="utf-8")
    now = time.time()
    os.utime(old, (now - EXPORT_MAX_AGE_SECONDS - 5,) * 2)
    assert prune_exports(tmp_path, now) == 1
    assert not old.exists() and (new / "c.md").exists()


def test_map_figure_colours_by_cluster_and_rings_cited_papers() -> None:
    from types import SimpleNamespace as NS

    from ui.atlas_view import AtlasCache, figure, related_papers

    pts = tuple(NS(paper_id=pid, x=float(i), y=0.0, cluster=i % 2)
                for i, pid in enumerate(PAPERS_BY))
    atlas = NS(points=pts, clusters=(NS(id=0, name="rl, reward", words=()),
                                     NS(id=1, name="tables", words=())),
               related={"000-01": ("003-14", "004-09", "nope")})
    fig = figure(atlas, PAPERS_BY, ["000-01"])
    names = [t.name for t in fig.data]
    assert names == ["rl, reward", "tables", "cited in the current answer"]
    assert list(fig.data[2].customdata) == ["000-01"]
    assert sum(len(t.x) for t in fig.data[:2]) == len(PAPERS_BY)
    cache = AtlasCache(object(), loader=lambda s: atlas)
    near = related_papers(cache, ["000-01", "003-14"], PAPERS_BY.get)
    assert [p.id for p in near["000-01"]] == ["003-14", "004-09"] and near["003-14"] == []


def test_upload_check_lists_errors_new_papers_and_duplicates() -> None:
    from types import SimpleNamespace as NS

    from ui.upload_tab import check_html

    bad = check_html(NS(ok=False, errors=("x.txt: line 3: not UTF-8 <b>",), new_papers=0,
                        duplicates=(), warnings=(), papers=()))
    assert "nothing was added" in bad and "&lt;b&gt;" in bad
    good = check_html(NS(ok=True, errors=(), new_papers=1, duplicates=("000-01 (SSL4RL)",),
                         warnings=(), papers=(PAPERS_BY["003-14"],)))
    assert "1 new paper" in good and "003-14 · TaRO" in good and "already in" in good


def test_a_url_in_an_answer_is_a_link_that_opens_in_a_new_tab() -> None:
    from ui.render import linked

    out = linked('Code: https://github.com/a/b?x=1&y="2". <b>Next</b> [1]')
    assert '<a class="ext" href="https://github.com/a/b?x=1&amp;y=" target="_blank" ' \
        'rel="noopener noreferrer">https://github.com/a/b?x=1&amp;y=</a>' in out
    assert "&quot;2&quot;. &lt;b&gt;Next&lt;/b&gt; [1]" in out  # the rest stays escaped text
    assert linked("no link here, www.example.com") == "no link here, www.example.com"
    assert linked("javascript:alert(1) http://x.org/p).") == \
        'javascript:alert(1) <a class="ext" href="http://x.org/p" target="_blank" ' \
        'rel="noopener noreferrer">http://x.org/p</a>).'


def test_a_url_ends_at_a_bracket_and_a_script_scheme_is_never_linked() -> None:
    from ui.render import linked

    out = linked("![x](http://evil.example/t.png)javascript:alert(1) http://a.org/javascript:x")
    assert 'href="http://evil.example/t.png"' in out and "javascript:alert(1)" in out
    assert out.count("<a ") == 1  # the second URL holds a script scheme: left as text
