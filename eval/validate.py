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

def main():
    corpus = load_corpus()
    errs, warns = [], []
    expected = {f"{p}-{i:02d}" for p in ("000", "003", "004") for i in range(1, 20)}
    if set(corpus) != expected:
        errs.append(f"corpus ids mismatch: {sorted(set(corpus) ^ expected)}")

    mins = {"paraphrase": 20, "name": 10, "topic": 6, "offtopic": 5,
            "notstated": 5, "followup": 6, "robust": 3}
    rows = []
    for n, line in enumerate(open(os.path.join(EVAL, "questions.jsonl"), encoding="utf-8"), 1):
        try:
            rows.append(json.loads(line))
        except Exception as e:
            errs.append(f"questions.jsonl line {n}: {e}")
    ids = Counter(r["id"] for r in rows)
    errs += [f"duplicate id {i}" for i, c in ids.items() if c > 1]
    kinds = Counter(r["kind"] for r in rows)
    for k, m in mins.items():
        if kinds[k] < m:
            errs.append(f"kind {k}: {kinds[k]} < {m}")
    if len(rows) < 70:
        errs.append(f"only {len(rows)} rows")
    for r in rows:
        rid, kind = r["id"], r["kind"]
        for f in ("id", "kind", "question", "gold", "keywords", "history", "answerable"):
            if f not in r:
                errs.append(f"{rid}: missing field {f}")
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
        if kind in ("paraphrase", "name", "followup", "robust") and len(r["gold"]) != 1:
            errs.append(f"{rid}: {kind} needs exactly 1 gold")
        if kind == "topic" and len(r["gold"]) < 2:
            errs.append(f"{rid}: topic needs several gold")
        if kind == "followup":
            h = r["history"]
            if not (h and all(len(t) == 2 for t in h) and re.search(r"\[\d+\]\s*\.?$", h[-1][1])):
                errs.append(f"{rid}: followup history malformed / no trailing citation")
        if want_ans:
            if not 1 <= len(r["keywords"]) <= 3:
                errs.append(f"{rid}: needs 1-3 keyword groups")
            texts = [corpus[g].lower() for g in r["gold"] if g in corpus]
            for grp in r["keywords"]:
                if not any(a.lower() in t for a in grp for t in texts):
                    errs.append(f"{rid}: keyword group {grp} not found in any gold abstract")
        if kind == "paraphrase":  # copying check: shared 5-grams with the gold abstract
            q = words(r["question"])
            a = " ".join(words(corpus[r["gold"][0]]))
            shared = [" ".join(q[i:i + 5]) for i in range(len(q) - 4) if " ".join(q[i:i + 5]) in a]
            if shared:
                warns.append(f"{rid}: paraphrase shares 5-grams with abstract: {shared}")

    crow = [json.loads(l) for l in open(os.path.join(EVAL, "compare.jsonl"), encoding="utf-8")]
    cids = Counter(r["id"] for r in crow)
    errs += [f"duplicate compare id {i}" for i, c in cids.items() if c > 1]
    if len(crow) < 12:
        errs.append(f"compare: only {len(crow)} rows")
    cexp = Counter(r.get("expect", "compare") for r in crow)
    if cexp["unknown"] < 2 or cexp["same"] < 1:
        errs.append(f"compare: expect counts {dict(cexp)}")
    for r in crow:
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
    print("compare rows:", len(crow), dict(cexp))
    print("labels:", len(labels), dict(Counter(v["kind"] for v in labels.values())))
    for w in warns:
        print("WARN", w)
    for e in errs:
        print("ERROR", e)
    print("OK" if not errs else f"FAILED ({len(errs)} errors)")
    return 1 if errs else 0

if __name__ == "__main__":
    sys.exit(main())
