"""Validate eval/questions.jsonl, eval/compare.jsonl and eval/labels.json against seeds/*.txt."""
import glob, json, os, re, sys
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVAL = os.path.join(ROOT, "eval")

def load_corpus():
    d = {}
    for f in sorted(glob.glob(os.path.join(ROOT, "seeds", "*.txt"))):
        lines = open(f, encoding="utf-8").read().splitlines()
        i = 0
        while not lines[i].strip():
            i += 1
        rest = "\n".join(lines[i + 1:])  # drop header line
        paras = [p.strip() for p in re.split(r"\n\s*\n", rest) if p.strip()]
        pre = re.match(r"\d+", os.path.basename(f)).group(0)
        for k, p in enumerate(paras, 1):
            d[f"{pre}-{k:02d}"] = p
    return d

def words(s):
    return re.findall(r"[a-z0-9]+", s.lower())

def plain(s):
    """Abstract text without markdown/LaTeX emphasis, so "**R**eward-free" matches "Reward-free"."""
    s = re.sub(r"\\(?:textbf|texttt|textit|emph)\{", "", s)
    return re.sub(r"[*{}$]", "", s)

SPLITS = ("dev", "test")
KINDS = ("paraphrase", "name", "topic", "offtopic", "notstated", "followup", "robust",
         "detail", "multilingual", "typo", "newtopic")
# minimum rows per (split, kind)
MINS = {
    "dev": {"paraphrase": 20, "name": 10, "topic": 6, "offtopic": 5, "notstated": 5,
            "followup": 6, "robust": 3, "detail": 3, "multilingual": 3, "typo": 1, "newtopic": 1},
    "test": {"paraphrase": 5, "name": 2, "topic": 6, "offtopic": 5, "notstated": 7,
             "followup": 4, "detail": 20, "multilingual": 12, "typo": 5, "newtopic": 5},
}
# script each multilingual language must use (others: non-ASCII or just not checked)
SCRIPT = {"zh": r"[\u4e00-\u9fff]", "ja": r"[\u3040-\u30ff]", "ko": r"[\uac00-\ud7af]",
          "ru": r"[\u0400-\u04ff]"}
# each multilingual keyword group needs a language-independent alternative: it contains a digit,
# an upper-case letter or one of @ % (method names, acronyms, numbers, dataset names)
LANG_FREE = re.compile(r"[0-9A-Z@%]")
VS = re.compile(r"\bvs\b\.?|\bversus\b", re.I)
WORK_HERE = re.compile(r"^what work is there\b.*\b(here|in this collection)\b", re.I)

def cited_history(h):
    return bool(h) and all(len(t) == 2 for t in h) and re.search(r"\[\d+\]\s*\.?$", h[-1][1])

def main():
    corpus = load_corpus()
    errs, warns = [], []
    expected = {f"{p}-{i:02d}" for p in ("000", "003", "004") for i in range(1, 20)}
    if set(corpus) != expected:
        errs.append(f"corpus ids mismatch: {sorted(set(corpus) ^ expected)}")

    rows = []
    for n, line in enumerate(open(os.path.join(EVAL, "questions.jsonl"), encoding="utf-8"), 1):
        try:
            rows.append(json.loads(line))
        except Exception as e:
            errs.append(f"questions.jsonl line {n}: {e}")
    ids = Counter(r["id"] for r in rows)
    errs += [f"duplicate id {i}" for i, c in ids.items() if c > 1]
    kinds = Counter(r["kind"] for r in rows)
    per = Counter((r.get("split"), r["kind"]) for r in rows)
    for sp, mins in MINS.items():
        for k, m in mins.items():
            if per[sp, k] < m:
                errs.append(f"split {sp} kind {k}: {per[sp, k]} < {m}")
    if len(rows) < 150:
        errs.append(f"only {len(rows)} rows")
    qtext = {}
    for r in rows:
        qtext.setdefault(r["question"].strip().lower(), []).append(r["id"])
    errs += [f"same question in rows {v}" for v in qtext.values() if len(v) > 1]
    test_topics = [r for r in rows if r.get("split") == "test" and r["kind"] == "topic"]
    if sum(bool(VS.search(r["question"])) for r in test_topics) < 3:
        errs.append("test: needs >= 3 topic rows with ' vs ' / 'versus'")
    if sum(bool(WORK_HERE.search(r["question"])) for r in test_topics) < 3:
        errs.append("test: needs >= 3 'What work is there on X here / in this collection?' topic rows")
    langs = {sp: Counter(r.get("lang") for r in rows if r.get("split") == sp and r["kind"] == "multilingual")
             for sp in SPLITS}
    if len(langs["test"]) < 6 or not {"zh", "ja", "es", "de", "fr"} <= set(langs["test"]):
        errs.append(f"test multilingual languages {dict(langs['test'])}: need >= 6 incl. zh ja es de fr")
    for r in rows:
        rid, kind = r["id"], r["kind"]
        for f in ("id", "kind", "question", "gold", "keywords", "history", "answerable", "split"):
            if f not in r:
                errs.append(f"{rid}: missing field {f}")
        if r.get("split") not in SPLITS:
            errs.append(f"{rid}: split must be one of {SPLITS}")
        if kind not in KINDS:
            errs.append(f"{rid}: unknown kind {kind!r}")
        for g in r["gold"]:
            if g not in corpus:
                errs.append(f"{rid}: unknown gold {g}")
        want_ans = kind not in ("offtopic", "notstated")
        if r["answerable"] != want_ans:
            errs.append(f"{rid}: answerable should be {want_ans}")
        if kind == "offtopic" and (r["gold"] or r["keywords"]):
            errs.append(f"{rid}: offtopic must have empty gold/keywords")
        if kind == "notstated" and (len(r["gold"]) != 1 or r["keywords"]):
            errs.append(f"{rid}: notstated needs 1 gold, no keywords")
        if kind in ("paraphrase", "name", "followup", "robust", "detail", "newtopic") and len(r["gold"]) != 1:
            errs.append(f"{rid}: {kind} needs exactly 1 gold")
        if kind in ("multilingual", "typo") and not r["gold"]:
            errs.append(f"{rid}: {kind} needs gold")
        if kind == "topic" and not r["gold"]:  # "is there work on X here?" may have one paper
            errs.append(f"{rid}: topic needs gold")
        if kind in ("followup", "newtopic"):
            if not cited_history(r["history"]):
                errs.append(f"{rid}: {kind} history malformed / no trailing citation")
        elif r["history"]:
            errs.append(f"{rid}: only followup/newtopic rows have history")
        if kind == "multilingual":
            lang = r.get("lang")
            if not lang or lang == "en":
                errs.append(f"{rid}: multilingual needs a non-English lang code")
            elif lang in SCRIPT and not re.search(SCRIPT[lang], r["question"]):
                errs.append(f"{rid}: question is not written in {lang} script")
            for grp in r["keywords"]:
                if not any(LANG_FREE.search(a) for a in grp):  # others may be translations
                    errs.append(f"{rid}: a multilingual keyword group needs a language-independent token: {grp}")
        elif "lang" in r and (r["lang"] == "en" or not r["question"].strip()):
            errs.append(f"{rid}: lang names a non-English question's language")
        if want_ans:
            if not 1 <= len(r["keywords"]) <= 4:
                errs.append(f"{rid}: needs 1-4 keyword groups (a list of four names asked for)")
            texts = [t for g in r["gold"] if g in corpus
                     for t in (corpus[g].lower(), plain(corpus[g]).lower())]
            for grp in r["keywords"]:
                if not any(a.lower() in t for a in grp for t in texts):
                    errs.append(f"{rid}: keyword group {grp} not found in any gold abstract")
        if kind == "paraphrase":  # copying check: shared 5-grams with the gold abstract
            q = words(r["question"])
            a = " ".join(words(corpus[r["gold"][0]]))
            shared = [" ".join(q[i:i + 5]) for i in range(len(q) - 4) if " ".join(q[i:i + 5]) in a]
            if shared:
                errs.append(f"{rid}: paraphrase shares 5-grams with abstract: {shared}")

    crow = [json.loads(l) for l in open(os.path.join(EVAL, "compare.jsonl"), encoding="utf-8")]
    cids = Counter(r["id"] for r in crow)
    errs += [f"duplicate compare id {i}" for i, c in cids.items() if c > 1]
    if len(crow) < 12:
        errs.append(f"compare: only {len(crow)} rows")
    cexp = Counter(r.get("expect", "compare") for r in crow)
    if cexp["unknown"] < 2 or cexp["same"] < 1:
        errs.append(f"compare: expect counts {dict(cexp)}")
    csplit = Counter(r.get("split") for r in crow)
    ctest = [r for r in crow if r.get("split") == "test"]
    foreign = [r for r in ctest if re.search(r"[^\x00-\x7f]", r["question"])
               or re.match(r"(vergleiche|compare[zr])\b", r["question"], re.I)]
    if csplit["test"] < 8 or not any(r["history"] for r in ctest) or not foreign:
        errs.append(f"compare: test needs >= 8 rows incl. a follow-up and a non-English one ({dict(csplit)})")
    if csplit["dev"] < 12:
        errs.append(f"compare: dev has only {csplit['dev']} rows")
    for r in crow:
        if r.get("split") not in SPLITS:
            errs.append(f"{r['id']}: split must be one of {SPLITS}")
        if r["history"] and not cited_history(r["history"]):
            errs.append(f"{r['id']}: history malformed / no trailing citation")
        for g in r["gold"]:
            if g not in corpus:
                errs.append(f"{r['id']}: unknown gold {g}")
        e = r.get("expect", "compare")
        if e == "compare" and (len(r["gold"]) != 2 or r["gold"][0] == r["gold"][1]):
            errs.append(f"{r['id']}: compare needs 2 distinct gold ids")
        if e == "unknown" and len(r["gold"]) != 1:
            errs.append(f"{r['id']}: unknown needs 1 gold")
        if e == "same" and len(set(r["gold"])) != 1:
            errs.append(f"{r['id']}: same needs one distinct id")

    labels = json.load(open(os.path.join(EVAL, "labels.json"), encoding="utf-8"))
    if set(labels) != expected:
        errs.append(f"labels ids mismatch: {sorted(set(labels) ^ expected)}")
    for k, v in labels.items():
        if v["kind"] not in ("name", "phrase"):
            errs.append(f"label {k}: bad kind")
        if len(v["label"].split()) > 8:
            errs.append(f"label {k}: > 8 words")
        if v["kind"] == "name" and v["label"] not in corpus.get(k, "").replace("\\texttt{", "").replace("$k$", "k"):
            errs.append(f"label {k}: name {v['label']!r} not found verbatim (case-sensitive) in abstract")

    print("questions per kind:", dict(sorted(kinds.items())), "total", len(rows))
    for sp in SPLITS:
        print(f"  {sp}:", {k: per[sp, k] for k in KINDS if per[sp, k]},
              "total", sum(v for (s_, _), v in per.items() if s_ == sp),
              "| languages", dict(langs[sp]))
    print("compare rows:", len(crow), dict(cexp), "per split", dict(csplit))
    print("labels:", len(labels), dict(Counter(v["kind"] for v in labels.values())))
    for w in warns:
        print("WARN", w)
    for e in errs:
        print("ERROR", e)
    print("OK" if not errs else f"FAILED ({len(errs)} errors)")
    return 1 if errs else 0

if __name__ == "__main__":
    sys.exit(main())
