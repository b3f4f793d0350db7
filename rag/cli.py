"""`rag prepare | ingest | search | ask | compare | eval | serve | papers`.

The only place library errors become one-line messages (exit code 2) and the only place,
with ui/app.py, that configures logging and draws progress bars.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from rag.config import Settings, load_settings, offline_environment
from rag.errors import InputError, RagError

log = logging.getLogger("rag")


def _components(settings: Settings) -> Any:
    from rag.embed import Embedder
    from rag.retrieve import Retriever
    from rag.store import Store

    store = Store(settings.store, settings.paths.data)
    embedder = Embedder(settings.embed)
    return store, embedder, Retriever(settings.retrieve, store, embedder)


def cmd_prepare(args: argparse.Namespace, s: Settings) -> int:
    from rag.models import prepare, prepare_gguf
    from rag.translate import translation_settings

    presets = [args.preset] if args.preset else [s.generate.preset]
    for name in presets:
        path = prepare(s.model_copy(update={"generate": s.generate.model_copy(
            update={"preset": name})}), progress=True)
        print(f"model ready: {path}")
    translation = translation_settings(s)
    if translation is not None and not args.preset:  # its GGUF file; llama.cpp runs it
        print(f"translation model ready: {prepare_gguf(translation, progress=True)}")
    return 0


def cmd_ingest(args: argparse.Namespace, s: Settings) -> int:
    from rag.ingest import ingest

    store, embedder, _ = _components(s)
    generator = None
    if s.titles.enabled and not args.no_titles:  # loads the model only if a title is missing
        from rag.generate import Generator

        generator = Generator(s)
    report = ingest(s, store, embedder, Path(args.seeds) if args.seeds else None,
                    progress=not args.quiet, batch_chunks=args.batch, generator=generator)
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(report.summary())
    return 0


def cmd_search(args: argparse.Namespace, s: Settings) -> int:
    _, _, retriever = _components(s)
    hits = retriever.search(args.query, k=args.k, group=args.papers, mode=args.mode)
    if args.json:
        print(json.dumps([{"paper_id": h.chunk.paper_id, "label": h.label,
                           "score": round(h.score, 6), "chunk_id": h.chunk.id,
                           "text": h.chunk.text} for h in hits], ensure_ascii=False, indent=1))
        return 0
    if not hits:
        print("no results; is the index empty? run `rag ingest`")
    for h in hits:
        print(f"{h.rank:>2}. {h.chunk.paper_id}  {h.label}  ({h.score:.4f})  {h.chunk.id}")
        print(f"    {h.chunk.text[:200]}{'…' if len(h.chunk.text) > 200 else ''}")
    return 0


def _print_stream(events: Any, as_json: bool) -> Any:
    from rag.types import Compared, Final, Sources, Status, Token

    answer = None
    for ev in events:
        if as_json:
            if isinstance(ev, Final):
                answer = ev.answer
            continue
        if isinstance(ev, Status):
            print(f"[{ev.message}]", file=sys.stderr)
        elif isinstance(ev, Sources) and ev.papers:
            print("sources: " + ", ".join(f"{p.label} ({p.id})" for p in ev.papers[:5]),
                  file=sys.stderr)
        elif isinstance(ev, Compared):
            from rag.export import comparison_table

            print(comparison_table(ev.comparison))
        elif isinstance(ev, Token):
            print(ev.text, end="", flush=True)
        elif isinstance(ev, Final):
            answer = ev.answer
    return answer


def _answer_json(a: Any) -> str:
    return json.dumps(asdict(a), ensure_ascii=False, indent=1, default=str)


def _show_final(a: Any) -> None:
    print("\n")
    print(a.text)
    if a.notice:
        print(f"note: {a.notice}")
    seen = set()
    for c in a.citations:
        if (c.marker, c.quote) in seen:
            continue
        seen.add((c.marker, c.quote))
        print(f"  [{c.marker}] {c.label} ({c.paper_id}): “{c.quote}”")
    for sent in a.sentences:
        if not sent.supported:
            print(f"  (unsupported) {sent.text}")
    if a.abstained and a.closest:
        print("closest papers: " + ", ".join(a.closest))


def cmd_ask(args: argparse.Namespace, s: Settings) -> int:
    from rag.assistant import Assistant

    a = Assistant.from_settings(s)
    answer = _print_stream(a.stream(args.question), args.json)
    if args.json:
        print(_answer_json(answer))
    else:
        _show_final(answer)
    return 0


def cmd_compare(args: argparse.Namespace, s: Settings) -> int:
    from rag.assistant import Assistant
    from rag.export import comparison_markdown

    if args.markdown and not Path(args.markdown).resolve().parent.is_dir():
        raise InputError(f"--markdown {args.markdown}: the folder "
                         f"{Path(args.markdown).resolve().parent} does not exist")
    a = Assistant.from_settings(s)
    answer = _print_stream(a.compare_stream(args.left, args.right), args.json)
    if args.json:
        print(_answer_json(answer))
    elif args.markdown:
        Path(args.markdown).write_text(
            comparison_markdown(answer, {p.id: p for p in a.papers()}), encoding="utf-8")
        print(f"\nwrote {args.markdown}")
    else:
        _show_final(answer)
    return 0 if answer and not (answer.comparison and answer.comparison.message) else 1


def cmd_eval(args: argparse.Namespace, s: Settings) -> int:
    from rag.eval_run import run_eval

    return run_eval(s, Path(args.questions), Path(args.out) if args.out else None,
                    retrieval_only=args.retrieval_only, mode=args.mode, limit=args.limit,
                    split=args.split, intent=args.intent)


def cmd_papers(args: argparse.Namespace, s: Settings) -> int:
    """`id  label` per paper in id order; --grep keeps the papers whose id, label or title
    contain TEXT (case-insensitive), then --offset skips and --limit stops, printing as it goes."""
    _, _, retriever = _components(s)
    grep = (args.grep or "").lower()
    skip, left = args.offset, args.limit
    for p in sorted(retriever.papers.values(), key=lambda p: p.id):
        if grep and grep not in f"{p.id} {p.label} {p.title}".lower():
            continue
        if skip:
            skip -= 1
            continue
        print(f"{p.id}  {p.label}")
        if left is not None:
            left -= 1
            if not left:
                break
    return 0


def cmd_serve(args: argparse.Namespace, s: Settings) -> int:
    from ui.app import main as serve

    if args.port:
        s = s.model_copy(update={"ui": s.ui.model_copy(update={"port": args.port})})
    serve(s)
    return 0


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line on stderr and exit code 2, like every other error."""

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split())
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def positive(text: str) -> int:
    """An argparse type: an integer > 0, named in the error otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def non_negative(text: str) -> int:
    """An argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def port(text: str) -> int:
    value = positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is 1-65535, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rag", description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = p.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("prepare", help="assemble and convert the local model (once)")
    sp.add_argument("--preset", help="qwen2.5-0.5b or qwen2.5-1.5b (default: configured)")
    sp.set_defaults(fn=cmd_prepare)
    sp = sub.add_parser("ingest", help="index the seed abstracts (incremental)")
    sp.add_argument("--seeds", help="folder of seed .txt files (default: paths.seeds); the "
                    "uploads folder (paths.uploads) is always read too")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    sp.add_argument("--no-titles", action="store_true", help="write no new titles this time "
                    "(cached ones are kept; titles.enabled=false turns them off)")
    sp.add_argument("--batch", type=positive, default=256, metavar="N",
                    help="chunks embedded and written per step (default 256)")
    sp.set_defaults(fn=cmd_ingest)
    sp = sub.add_parser("search", help="hybrid search over the index")
    sp.add_argument("query")
    sp.add_argument("--k", type=positive, default=5)
    sp.add_argument("--papers", action="store_true", help="best chunk per paper")
    sp.add_argument("--mode", choices=["hybrid", "dense", "bm25"])
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_search)
    sp = sub.add_parser("ask", help="answer a question with cited abstracts")
    sp.add_argument("question")
    sp.add_argument("--json", action="store_true", help="print the final answer object")
    sp.set_defaults(fn=cmd_ask)
    sp = sub.add_parser("compare", help="compare two papers side by side")
    sp.add_argument("left", help="paper id, name or description")
    sp.add_argument("right")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--markdown", metavar="FILE", help="write the comparison as Markdown")
    sp.set_defaults(fn=cmd_compare)
    sp = sub.add_parser("eval", help="run a question file and print metrics")
    sp.add_argument("questions")
    sp.add_argument("--out", help="write one JSON row per question")
    sp.add_argument("--retrieval-only", action="store_true")
    sp.add_argument("--mode", choices=["hybrid", "dense", "bm25"])
    sp.add_argument("--limit", type=positive, help="only the first N rows")
    sp.add_argument("--split", choices=["dev", "test"], help="only that split (default: both, "
                    "reported apart)")
    sp.add_argument("--intent", choices=["find", "answer", "compare", "decline"],
                    help="only the rows the router sends there (find: no model, a minute)")
    sp.set_defaults(fn=cmd_eval)
    sp = sub.add_parser("papers", help="list the indexed papers")
    sp.add_argument("--limit", type=positive, metavar="N", help="print at most N papers")
    sp.add_argument("--offset", type=non_negative, default=0, metavar="N",
                    help="skip the first N papers (after --grep)")
    sp.add_argument("--grep", metavar="TEXT", help="only papers whose id, label or title "
                    "contain TEXT (case-insensitive)")
    sp.set_defaults(fn=cmd_papers)
    sp = sub.add_parser("serve", help="serve the browser chat on 127.0.0.1")
    sp.add_argument("--port", type=port)
    sp.set_defaults(fn=cmd_serve)
    return p


def main(argv: list[str] | None = None) -> int:
    offline_environment()
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("transformers", "sentence_transformers", "chromadb", "httpx", "bm25s"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    try:
        settings = load_settings()
        return int(args.fn(args, settings))
    except RagError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a file named on the command line cannot be read or written
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
