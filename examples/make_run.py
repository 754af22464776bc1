#!/usr/bin/env python3
"""Regenerate the bundled run.jsonl: a simulated RAG run over kb/ for golden.jsonl.

The data lives in python/ragmeter/_example/ so that it ships in the package (ragmeter demo).

Stdlib only and fully deterministic: running it twice gives the same bytes.

    python examples/make_run.py            # write python/ragmeter/_example/run.jsonl
    python examples/make_run.py --check    # validate golden.jsonl against the KB, and run.jsonl
                                           # against a fresh regeneration (writes nothing)

The pipeline imitates a small production RAG stack:

* chunking: blank-line separated blocks packed into chunks of at most ~300 display columns
  (a CJK or full-width character counts as two); over-long blocks are split at line breaks.
  Chunk ids are ``<file>#<n>``, n counting from 0 within the file.
* retrieval: BM25 (character bigrams for CJK, lower-cased words for everything else) and a
  "dense" channel, fused with reciprocal rank fusion ("hybrid"). The dense channel is a
  stand-in for a multilingual embedding model: BM25 over the query expanded with a small
  hand-written concept lexicon (hotel -> 住宿, laptop -> 电脑, ...), which is what lets
  cross-lingual and paraphrased questions reach the right chunks at all.
* reranking: every pooled candidate gets a score in [0, 1] from the share of the query's
  weight found in the chunk (expanded terms count for less), squashed by a logistic.
  Questions worded unlike the document therefore get low scores even for the right chunk.
* the top 8 candidates per case are stored, so thresholds and cut-offs can be swept later.

Like a real retriever, it analyses text with NFKC; the stored chunk texts are the raw
extracted text with its OCR artefacts, which is what evidence matching has to cope with.
"""
import argparse
import json
import math
import os
import random
import re
import sys
import unicodedata
from collections import Counter

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python", "ragmeter", "_example")
KB_DIR = os.path.join(HERE, "kb")
GOLDEN = os.path.join(HERE, "golden.jsonl")
RUN = os.path.join(HERE, "run.jsonl")

CHUNK_WIDTH = 300
POOL = 20          # candidates handed to the reranker
KEEP = 8           # candidates stored per case
RRF_K = 60
K1, B = 1.2, 0.75
DENSE_EXPANSION_WEIGHT = 0.6     # weight of lexicon-expanded terms in the dense channel
RERANK_EXPANSION_WEIGHT = 0.2    # ... and in the reranker, which mostly rewards literal overlap
RERANK_SLOPE, RERANK_MID = 9.0, 0.46
RANK_PRIOR = 0.04

CATEGORIES = ("fact", "paraphrase", "multihop", "conflict", "private", "crossdoc", "noanswer")

# The deliberate annotation slip: the HR document says "1.5~2" (full-width in the PDF text).
KNOWN_SLIPS = {("private-02-year-end-bonus", "1.5-2 个月月薪")}

# ---------------------------------------------------------------------------------------------
# Chunking


def width(s):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def _split_long(block):
    if width(block) <= CHUNK_WIDTH:
        return [block]
    out, cur = [], ""
    for line in block.split("\n"):
        while width(line) > CHUNK_WIDTH:
            n = CHUNK_WIDTH
            while width(line[:n]) > CHUNK_WIDTH:
                n -= 1
            if cur:
                out.append(cur)
                cur = ""
            out.append(line[:n])
            line = line[n:]
        if cur and width(cur) + 1 + width(line) > CHUNK_WIDTH:
            out.append(cur)
            cur = line
        else:
            cur = cur + "\n" + line if cur else line
    if cur:
        out.append(cur)
    return out


def chunk_text(text):
    blocks = [b.strip("\n") for b in re.split(r"\n[ \t]*\n", text) if b.strip()]
    out, cur = [], ""
    for block in blocks:
        for piece in _split_long(block):
            if cur and width(cur) + 2 + width(piece) > CHUNK_WIDTH:
                out.append(cur)
                cur = piece
            else:
                cur = cur + "\n\n" + piece if cur else piece
    if cur:
        out.append(cur)
    return out


def load_kb():
    chunks = []  # (file, chunk_id, text)
    for name in sorted(os.listdir(KB_DIR)):
        with open(os.path.join(KB_DIR, name), encoding="utf-8") as f:
            text = f.read()
        for i, piece in enumerate(chunk_text(text)):
            chunks.append((name, "%s#%d" % (name, i), piece))
    return chunks


# ---------------------------------------------------------------------------------------------
# Analysis

STOPWORDS = set("""
a an the is are was were be been do does did i i'm im my me we our us you your it its of to in
on for at by with and or what which who whom how when where why can could should would will
much many that this these those there as if from any so about still get got have has had just
than then them they their also into out up down all some such not no yes one now new after
before because off went long t s don anything first
""".split())

# question phrasing that says nothing about the topic
CJK_STOP = {"什么", "多少", "哪些", "哪里", "哪家", "怎么", "么办", "应该", "该怎", "是多", "少钱",
            "是否", "可以", "一般", "我们", "如果", "的是"}

CJK_RUN = r"[\u3400-\u4dbf\u4e00-\u9fff]+"
TOKEN_RE = re.compile(r"[a-z0-9]+|" + CJK_RUN)


def _stem(w):
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if len(w) > 5 and w.endswith("ed"):
        w = w[:-2]
    if len(w) > 5 and w.endswith("e"):
        w = w[:-1]
    return w


def analyse(text):
    t = unicodedata.normalize("NFKC", text).lower()
    toks = []
    for m in TOKEN_RE.finditer(t):
        s = m.group(0)
        if s[0] >= "\u3400":
            if len(s) == 1:
                toks.append(s)
            else:
                toks.extend(s[i:i + 2] for i in range(len(s) - 1) if s[i:i + 2] not in CJK_STOP)
        elif s not in STOPWORDS:
            toks.append(_stem(s))
    return toks


# Stand-in for what a multilingual embedding model "knows": query term -> related document terms.
CONCEPTS = {
    "bundler": ["bundled", "vite"], "ui": ["react", "frontend"], "library": ["react"],
    "j": ["typescript"], "console": ["frontend"],
    "hotel": ["住宿", "酒店", "每晚"], "night": ["每晚"], "shenzhen": ["深圳", "一线"],
    "spend": ["费用", "标准"], "travelling": ["出差", "差旅"], "trip": ["出差", "差旅"],
    "business": ["出差"], "money": ["报销", "费用"], "back": ["报销"], "claim": ["报销", "提交"],
    "pager": ["page", "on-call"], "respond": ["acknowledge"], "customer": ["customer-facing"],
    "到账": ["打入", "工资"], "账": ["款项"], "批下": ["审核", "通过"],
    "cover": ["swap"], "teammate": ["swap"], "week": ["rotation", "weekly"],
    "笔记": ["laptop"], "电脑": ["laptop", "devices"], "丢了": ["lost", "incident"],
    "difference": ["超标"], "allowed": ["标准", "不超过"], "pay": ["承担"], "cost": ["超标"],
    "thousand": ["400", "changed"], "line": ["changed", "split"], "touches": ["changed"],
    "change": ["pr", "pull", "request"],
    "eligible": ["授予"], "stock": ["股票", "期权"], "option": ["期权"], "vest": ["归属"],
    "解约": ["terminate", "termination"], "违约": ["fee", "termination"], "通知": ["notice"],
    "提前": ["early"], "合同": ["agreement"],
    "存放": ["存储", "stored"], "供应": ["provider", "hosting"], "托管": ["hosting"],
    "engineer": ["工程"], "production": ["生产", "环境"], "first": ["第一", "入职"],
    "machine": ["provider", "hosting"], "kept": ["stored"], "vendor": ["provider"], "gpu": ["hosting"], "report": ["notify"],
    "approve": ["sign-off", "approval"], "hotfix": ["release"],
    "值班": ["on-call", "weekend"], "补贴": ["cny", "paid"], "周末": ["weekend"],
    "ppt": ["pptx"], "扫描": ["scanned", "ocr"], "格式": ["format"],
    "uptime": ["service", "credit"]
}


_CONCEPT_INDEX = {}


def expand(tokens):
    if not _CONCEPT_INDEX:
        for key, related in CONCEPTS.items():
            for k in analyse(key) or [key]:
                _CONCEPT_INDEX.setdefault(k, []).extend(t for r in related for t in analyse(r))
    out = []
    for t in tokens:
        out.extend(_CONCEPT_INDEX.get(t, ()))
    return out


class BM25:
    def __init__(self, docs):
        self.tfs = [Counter(d) for d in docs]
        self.lens = [len(d) for d in docs]
        self.avg = sum(self.lens) / len(self.lens)
        df = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def score(self, weighted_terms, i):
        tf, norm = self.tfs[i], K1 * (1 - B + B * self.lens[i] / self.avg)
        s = 0.0
        for t, w in weighted_terms.items():
            f = tf.get(t)
            if f:
                s += w * self.idf[t] * f * (K1 + 1) / (f + norm)
        return s

    def coverage(self, weighted_terms, i):
        """Weighted share of the query's idf mass found in chunk i (expanded terms weigh less)."""
        tf = self.tfs[i]
        total = sum(w * self.idf.get(t, 1.0) for t, w in weighted_terms.items())
        got = sum(w * self.idf[t] for t, w in weighted_terms.items() if t in tf)
        return got / total if total else 0.0


def weighted_query(question, expansion_weight=0.0):
    q = analyse(question)
    terms = {t: 1.0 for t in q}
    if expansion_weight:
        for t in expand(q):
            terms.setdefault(t, expansion_weight)
    return terms


def retrieve(index, chunks, question, mode):
    lexical = weighted_query(question)
    n = len(chunks)
    bm25 = sorted(range(n), key=lambda i: (-index.score(lexical, i), i))
    if mode == "hybrid":
        dense_q = weighted_query(question, DENSE_EXPANSION_WEIGHT)
        dense = sorted(range(n), key=lambda i: (-index.score(dense_q, i), i))
        fused = Counter()
        for ranking in (bm25, dense):
            for r, i in enumerate(ranking):
                fused[i] += 1.0 / (RRF_K + r + 1)
        pool = sorted(range(n), key=lambda i: (-fused[i], i))[:POOL]
        rerank_q = weighted_query(question, RERANK_EXPANSION_WEIGHT)
    else:
        pool = bm25[:POOL]
        rerank_q = lexical
    scored = []
    for r, i in enumerate(pool):
        # the cross-encoder agrees a little with the first stage: a small prior for pool rank
        cov = index.coverage(rerank_q, i) + RANK_PRIOR * (1 - r / POOL)
        score = 1.0 / (1.0 + math.exp(-RERANK_SLOPE * (cov - RERANK_MID)))
        scored.append((round(score, 4), -r, i))
    scored.sort(reverse=True)
    return [(chunks[i], s) for s, _, i in scored[:KEEP]]


# ---------------------------------------------------------------------------------------------
# The simulated generator: hand-written answers, keyed by case id.

ANSWERS = {
    "fact-01-frontend-stack": "Our web apps use React 18 with TypeScript 5, bundled with Vite. Client state is in Zustand, server state goes through TanStack Query, and styling is Tailwind CSS with the @meridian/tokens package. Package manager is pnpm on Node 20 LTS.",
    "fact-02-primary-database": "PostgreSQL 15 is the primary database; Redis 7 is used for caching and API rate limiting.",
    "fact-03-p1-ack-time": "A P1 must be acknowledged within 15 minutes.",
    "fact-04-hotel-cap-tier1": "一线城市（北京、上海、深圳、广州）住宿费每晚不超过 600 元，其他城市不超过 400 元，超标部分由个人承担。",
    "fact-05-meal-allowance": "出差餐费补助为每人每天 100 元，按自然日计算，不需要提供发票。",
    "fact-06-cloudnine-uptime": "CloudNine guarantees 99.9% monthly uptime for the hosting services.",
    "fact-07-contract-term": "The initial term is 24 months, starting 1 May 2024, and it renews automatically for 12-month periods.",
    "fact-08-prod-hardware-key": "Yes. In addition to MFA, production access requires a hardware security key (a YubiKey issued by IT).",
    "fact-09-core-hours": "核心工作时间为 10:00-16:00，其余时间弹性安排。",
    "fact-10-release-cadence": "Releases are cut from main every Tuesday at 14:00.",
    "paraphrase-01-bundler-ui-lib": "The web console is built with React 18 and TypeScript 5 and bundled with Vite.",
    "paraphrase-02-hotel-shenzhen": "Shenzhen counts as a tier-1 city, so the hotel cap is 600 CNY per night.",
    "paraphrase-03-pager-big-outage": "I couldn't find a required response time for pages in the retrieved documents. The on-call policy applies to every engineer after their first three months.",
    "paraphrase-04-claim-deadline": "The documents do not say how long you have to submit an expense claim.",
    "paraphrase-05-when-money-arrives": "财务审核通过后 5 个工作日内打款到工资卡。",
    "paraphrase-06-cover-my-week": "Shift swaps must be recorded in PagerDuty at least 24 hours in advance, otherwise it counts as a missed shift for you.",
    "paraphrase-07-lost-laptop": "请联系 IT，笔记本电脑由 IT 在前台重新发放，领取后重新开通飞书、企业邮箱和 GitHub 账号即可。",
    "paraphrase-08-hotel-overspend": "The company covers the difference if your manager approves it.",
    "paraphrase-09-huge-change": "No. Anything over 400 changed lines should be split before review.",
    "multihop-01-shanghai-hotel-claim": "上海是一线城市，住宿每晚上限 600 元，3 晚最多报销 1800 元，超出部分自理；报销须在费用发生后 30 天内提交。",
    "multihop-02-escalation-30min": "After 15 minutes the secondary is paged, and at 30 minutes the engineering manager on duty. If it is still open after an hour it is escalated to the VP of Engineering and the status page must be updated.",
    "multihop-03-weekend-night-incident": "You get the weekend on-call rate of 400 CNY for the day, plus half a day of compensatory leave because you worked after 22:00.",
    "multihop-04-sla-credit-98-7": "Uptime below 99.9% gives a service credit of 10% of the monthly fee.",
    "multihop-05-early-termination": "检索到的合同内容中没有提前解约的条款，无法确定通知期和违约金，建议咨询法务。",
    "multihop-06-big-entertainment": "需要事先提交招待申请，报销时由直属上级审批后财务审核；超过 5000 元还要部门负责人和财务总监双签。",
    "multihop-07-hotfix-approvals": "The release captain has to sign off the hotfix, and the production deploy needs a manual approval from the on-call engineer in Argo CD.",
    "conflict-01-max-upload-size": "200 MB per file since Beacon 2.0; in 1.x the limit was 50 MB.",
    "conflict-02-api-rate-limit": "每个工作区每分钟 300 次请求。",
    "conflict-03-trash-retention": "Deleted documents stay in the trash for 30 days.",
    "conflict-04-default-embedding": "Since Beacon 2.0 the default embedding model is bge-m3 (1024 dimensions); 1.x used bge-base-zh.",
    "conflict-05-scanned-pdf": "Yes, since 2.0 scanned PDFs are OCR'd, but only on the Enterprise plan.",
    "conflict-06-search-endpoint": "No, /v1/search is deprecated and removed on 2024-10-31; new integrations should use /v2/search.",
    "private-01-p6-salary-band": "P6 月薪为 35,000-52,000 元（税前）。",
    "private-02-year-end-bonus": "年终奖一般为 1.5~2 个月月薪，绩效 A 最高 3 个月，绩效 C 没有年终奖。",
    "private-03-salary-review": "年度调薪在每年 4 月，平均幅度 6%。",
    "private-04-stock-options": "The documents do not describe a stock option plan.",
    "private-05-annual-leave-5y": "满 5 年可享受 15 天带薪年假。",
    "private-06-probation-pay": "抱歉，没有检索到相关资料，无法回答。",
    "crossdoc-01-vendor-vs-oncall-p1": "CloudNine must give a first response to Priority 1 tickets within 30 minutes; our on-call must acknowledge a P1 within 15 minutes.",
    "crossdoc-02-data-residency": "Customer data is stored and processed in mainland China only. The documents don't say which company runs the hardware.",
    "crossdoc-03-new-hire-prod-access": "Ask your team lead for a masked snapshot: production database snapshots must be masked with the pgmask job before they are restored to a developer machine.",
    "crossdoc-04-p1-hotfix-lifecycle": "The hotfix needed the release captain's sign-off, and a blameless postmortem is due within 5 business days.",
    "crossdoc-05-new-vendor-checklist": "The vendor must pass a security assessment and a DPA must be attached to the contract. CloudNine must notify us of security incidents within 24 hours.",
    "crossdoc-06-formats-today": "支持 PDF、DOCX、TXT、Markdown 和 PPTX，扫描件可在企业版中 OCR。",
    "crossdoc-07-weekend-oncall-pay": "法定节假日加班按 3 倍计算加班费；资料中没有找到周末值班补贴的标准。",
    "noanswer-01-parental-leave": "The documents do not say anything about parental leave.",
    "noanswer-02-annual-party": "资料中没有提到年会的举办地点。",
    "noanswer-03-k8s-version": "The documents do not say which Kubernetes version production runs on.",
    "noanswer-04-beacon-customer-sla": "Beacon Enterprise customers get a 99.9% monthly uptime SLA, with service credits of 10% of the monthly fee below that.",
    "noanswer-05-office-wifi": "I couldn't find the Wi-Fi password in the documents. Please ask the IT service desk.",
    "noanswer-06-cto": "资料中没有提到 CTO 是谁。",
}

# Run incidents, as they happened on the day this run was recorded.
MISSING_FROM_RUN = {"crossdoc-06-formats-today"}          # request timed out, never logged
EMPTY_RETRIEVAL = {"private-06-probation-pay"}             # ACL filter dropped every candidate
BM25_FALLBACK = ("multihop-04-sla-credit-98-7",           # embedding quota exhausted:
                 "multihop-05-early-termination",         # three consecutive requests fell
                 "multihop-06-big-entertainment")         # back to keyword-only retrieval
WITH_NEIGHBOURS = {"multihop-02-escalation-30min", "multihop-07-hotfix-approvals",
                   "crossdoc-04-p1-hotfix-lifecycle", "fact-07-contract-term"}

GENERATOR_CONTEXT = 5
SYSTEM_PROMPT_TOKENS = 212
PRICE_PROMPT, PRICE_COMPLETION = 0.15e-6, 0.60e-6   # USD per token


def est_tokens(text):
    cjk = sum(1 for c in text if unicodedata.east_asian_width(c) in "WF")
    return cjk + (len(text) - cjk + 3) // 4


def read_golden():
    cases = []
    with open(GOLDEN, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            if s and not s.startswith(("#", "//")):
                cases.append(json.loads(s))
    return cases


def build_run():
    chunks = load_kb()
    index = BM25([analyse(text) for _, _, text in chunks])
    position = {cid: n for n, (_, cid, _) in enumerate(chunks)}
    lines = []
    for case in read_golden():
        cid = case["id"]
        if cid in MISSING_FROM_RUN:
            continue
        rng = random.Random(cid)
        mode = "bm25" if cid in BM25_FALLBACK else "hybrid"
        hits = [] if cid in EMPTY_RETRIEVAL else retrieve(index, chunks, case["question"], mode)
        retrieved = [{"file": f, "chunk_id": c, "text": t, "score": s} for (f, c, t), s in hits]
        seen = [r["text"] for r in retrieved[:GENERATOR_CONTEXT]]
        rec = {"id": cid, "retrieved": retrieved}
        if cid in WITH_NEIGHBOURS and retrieved:
            # the generator got the top chunks plus the chunk following the best one
            nxt = position[retrieved[0]["chunk_id"]] + 1
            if nxt < len(chunks) and chunks[nxt][0] == retrieved[0]["file"] \
                    and chunks[nxt][2] not in seen:
                seen = seen + [chunks[nxt][2]]
            rec["contexts"] = seen
        answer = ANSWERS[cid]
        prompt = SYSTEM_PROMPT_TOKENS + est_tokens(case["question"]) + sum(est_tokens(t) for t in seen)
        completion = est_tokens(answer) + rng.randint(2, 9)
        latency = (140 if mode == "bm25" else 420) + rng.randint(0, 260) \
            + int(0.35 * prompt) + 21 * completion
        rec.update({
            "answer": answer,
            "retrieval_mode": mode,
            "latency_ms": latency,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
            "cost": round(prompt * PRICE_PROMPT + completion * PRICE_COMPLETION, 7),
        })
        lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
    return "".join(lines)


# ---------------------------------------------------------------------------------------------
# --check


def norm(s):
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", s)).lower()


def check(run_text):
    problems = []
    cases = read_golden()
    chunks = load_kb()
    files = sorted(os.listdir(KB_DIR))
    file_text = {}
    for name in files:
        with open(os.path.join(KB_DIR, name), encoding="utf-8") as f:
            file_text[name] = f.read()
    ids = [c["id"] for c in cases]
    if len(set(ids)) != len(ids):
        problems.append("duplicate ids in golden.jsonl")
    cats = Counter(i.split("-", 1)[0] for i in ids)
    if set(cats) != set(CATEGORIES):
        problems.append("categories are %s, expected %s" % (sorted(cats), sorted(CATEGORIES)))
    raw_misses = 0
    slips_seen = set()
    for c in cases:
        cat = c["id"].split("-", 1)[0]
        ef, ev = c["expectedFileNames"], c["expectedEvidence"]
        if cat == "noanswer":
            if ef or ev:
                problems.append("%s: no-answer case with labels" % c["id"])
            continue
        if not ef or not ev:
            problems.append("%s: missing expected files or evidence" % c["id"])
        if cat == "crossdoc" and len(ef) < 2:
            problems.append("%s: cross-document case with fewer than 2 files" % c["id"])
        for f in ef:
            if f not in file_text:
                problems.append("%s: unknown file %s" % (c["id"], f))
        for e in ev:
            in_file = [f for f in ef if norm(e) in norm(file_text.get(f, ""))]
            in_chunk = [cid for f, cid, t in chunks if f in ef and norm(e) in norm(t)]
            if (c["id"], e) in KNOWN_SLIPS:
                slips_seen.add((c["id"], e))
                if in_file or any(norm(e) in norm(t) for t in file_text.values()):
                    problems.append("%s: the deliberate slip %r is found in the KB" % (c["id"], e))
                continue
            if not in_file:
                problems.append("%s: evidence %r not in %s after normalisation" % (c["id"], e, ef))
            elif not in_chunk:
                problems.append("%s: evidence %r spans a chunk boundary" % (c["id"], e))
            if not any(e in file_text.get(f, "") for f in ef):
                raw_misses += 1
    if slips_seen != KNOWN_SLIPS:
        problems.append("the deliberate annotation slip is missing from golden.jsonl")
    for cid in ANSWERS:
        if cid not in ids:
            problems.append("answer for unknown case %s" % cid)
    fresh = build_run()
    if run_text != fresh:
        problems.append("python/ragmeter/_example/run.jsonl differs from a fresh regeneration (run examples/make_run.py)")
    run_ids = [json.loads(line)["id"] for line in fresh.splitlines()]
    missing = [i for i in ids if i not in run_ids]
    if set(missing) != MISSING_FROM_RUN:
        problems.append("cases missing from the run: %s" % missing)
    n_ev = sum(len(c["expectedEvidence"]) for c in cases)
    print("golden: %d cases %s" % (len(cases), dict(sorted(cats.items()))))
    print("evidence phrases: %d; %d need normalisation to match (plain substring fails), "
          "%d deliberate slip(s)" % (n_ev, raw_misses, len(KNOWN_SLIPS)))
    print("kb: %d files, %d chunks; run: %d of %d cases" % (len(files), len(chunks), len(run_ids), len(ids)))
    for p in problems:
        print("PROBLEM:", p)
    return not problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="validate golden.jsonl and run.jsonl; write nothing")
    args = ap.parse_args(argv)
    if args.check:
        try:
            with open(RUN, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = ""
        ok = check(current)
        print("check: OK" if ok else "check: FAILED")
        return 0 if ok else 1
    text = build_run()
    with open(RUN, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print("wrote %s (%d cases)" % (os.path.relpath(RUN), text.count("\n")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
