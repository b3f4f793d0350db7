"""The map of the papers, without gradio: the cached atlas, its Plotly figure, related papers.

The layout and clusters are computed at ingest by rag.atlas and read here once (and again after
an upload), never per page view. Plotly is imported only here.
"""

from __future__ import annotations

import html
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rag.types import Paper
from ui.render import display_name, is_generated

log = logging.getLogger(__name__)

RELATED = 3
PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04",
           "#db2777", "#4b5563", "#65a30d", "#7c3aed", "#0d9488"]


def _load_from_library(settings: Any) -> Any:
    try:
        from rag.atlas import load_atlas  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # the library side is older than this UI: no map
        return None
    return load_atlas(settings)


class AtlasCache:
    """The atlas of the index, read once; `reload()` after an ingest. Thread-safe."""

    def __init__(self, settings: Any, loader: Callable[[Any], Any] | None = None) -> None:
        self.settings, self.loader = settings, loader
        self._lock = threading.Lock()
        self._atlas: Any = None
        self._loaded = False

    def get(self) -> Any:
        with self._lock:
            if not self._loaded:
                self._atlas = self._read()
                self._loaded = True
            return self._atlas

    def reload(self) -> Any:
        with self._lock:
            self._atlas = self._read()
            self._loaded = True
            return self._atlas

    def _read(self) -> Any:
        if self.settings is None:
            return None
        try:
            return (self.loader or _load_from_library)(self.settings)
        except Exception:  # the map is a view: a broken atlas must not break the chat
            log.exception("the atlas could not be read")
            return None

    def related(self, pid: str) -> tuple[str, ...]:
        atlas = self.get()
        if atlas is None:
            return ()
        return tuple(atlas.related.get(pid, ()))[:RELATED]


def related_papers(cache: AtlasCache, pids: Iterable[str],
                   lookup: Callable[[str], Paper | None]) -> dict[str, list[Paper]]:
    """Each paper's nearest papers (as Papers), for the sources panel and the Papers tab."""
    out: dict[str, list[Paper]] = {}
    for pid in pids:
        near = [lookup(r) for r in cache.related(pid)]
        out[pid] = [p for p in near if p is not None]
    return out


def _hover(p: Paper | None, pid: str) -> str:
    if p is None:
        return html.escape(pid)
    gen = " (generated title)" if is_generated(p) else ""
    return f"<b>{html.escape(display_name(p))}</b>{gen}<br>{html.escape(p.id)}"


def figure(atlas: Any, papers: Mapping[str, Paper], highlight: Sequence[str] = ()) -> Any:
    """A scatter of the atlas points, one trace (legend entry) per cluster; the papers in
    `highlight` (cited in the current answer) ringed on top. customdata is the paper id."""
    import plotly.graph_objects as go

    fig = go.Figure()
    names = {c.id: c.name for c in atlas.clusters}
    by_cluster: dict[Any, list[Any]] = {}
    for pt in atlas.points:
        by_cluster.setdefault(pt.cluster, []).append(pt)
    order = [c.id for c in atlas.clusters] + sorted(
        (k for k in by_cluster if k not in names), key=str)
    for i, cid in enumerate(order):
        pts = by_cluster.get(cid, [])
        if not pts:
            continue
        fig.add_trace(go.Scatter(
            x=[p.x for p in pts], y=[p.y for p in pts], mode="markers",
            name=html.escape(str(names.get(cid, f"cluster {cid}"))),
            customdata=[p.paper_id for p in pts],
            hovertext=[_hover(papers.get(p.paper_id), p.paper_id) for p in pts],
            hovertemplate="%{hovertext}<extra>%{fullData.name}</extra>",
            marker={"size": 11, "color": PALETTE[i % len(PALETTE)], "opacity": 0.85,
                    "line": {"width": 0.5, "color": "white"}}))
    wanted = set(highlight)
    hot = [p for p in atlas.points if p.paper_id in wanted]
    if hot:
        fig.add_trace(go.Scatter(
            x=[p.x for p in hot], y=[p.y for p in hot], mode="markers",
            name="cited in the current answer", customdata=[p.paper_id for p in hot],
            hovertext=[_hover(papers.get(p.paper_id), p.paper_id) for p in hot],
            hovertemplate="%{hovertext}<extra>cited</extra>",
            marker={"size": 20, "color": "rgba(0,0,0,0)", "symbol": "circle",
                    "line": {"width": 3, "color": "#111827"}}))
    fig.update_layout(
        margin={"l": 8, "r": 8, "t": 8, "b": 8}, height=560, clickmode="event",
        hovermode="closest", dragmode="pan", plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
        legend={"orientation": "h", "yanchor": "top", "y": -0.02, "x": 0,
                "font": {"size": 11}},
        xaxis={"visible": False}, yaxis={"visible": False, "scaleanchor": "x"})
    return fig


def summary(atlas: Any) -> str:
    if atlas is None:
        return ("The map is not available: the index has no layout yet. Run `rag ingest` "
                "(it computes the layout and topics once).")
    return (f"{len(atlas.points)} papers in {len(atlas.clusters)} topics. Hover a point for "
            "its title, click it to select the paper; papers cited in the current answer are "
            "ringed.")
