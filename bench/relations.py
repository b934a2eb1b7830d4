"""The causal relations extraction reads from the public sets' texts, and what a change moved.

    .venv/bin/python bench/relations.py --save var/relations-before.json
    ... change memory/extraction ...
    .venv/bin/python bench/relations.py --compare var/relations-before.json

Every fact of the ReasonGraph sets and every LoCoMo turn (as the quality bench writes
it, "speaker: text") goes through the configured extractors as a write's extraction
runs them (``memory.extraction.causal.extract_relations`` on the packaged parser's
parse; text in a language with a connective table of its own is read by that table).
Prints, per set, the texts, the texts with a relation, the relations and the most
common cues; ``--compare`` then lists every text whose relations changed, with the
relations it lost (-) and gained (+), and counts them by cue. No server, no database:
extraction only. Not a test: it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.answer_roots import SETS  # noqa: E402  (the ReasonGraph sets: file and reader)
from bench.eval_quality import DEFAULT_DATA, locomo_conversations, locomo_turns  # noqa: E402
from bench.machine import machine  # noqa: E402


def texts_by_set(data: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, (file, reader) in SETS.items():
        facts, _questions = reader(data / "reasongraph" / file)
        out[name] = list(dict.fromkeys(f["content"] for f in facts))
    pairs = [
        json.loads(line) for line in (data / "reasongraph" / "contradictions.jsonl").open(encoding="utf-8")
    ]
    out["contradictions"] = list(dict.fromkeys(p[k] for p in pairs for k in ("old", "new") if p.get(k)))
    turns = [
        text
        for conv in locomo_conversations(data / "locomo" / "locomo10.zip")
        for _, _, text, _ in locomo_turns(conv)
    ]
    out["locomo"] = list(dict.fromkeys(turns))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("FEDMEM_BENCH_DATA", DEFAULT_DATA)))
    parser.add_argument("--save", type=Path, help="write every text's relations here (JSON)")
    parser.add_argument("--compare", type=Path, help="list what changed against a file --save wrote")
    args = parser.parse_args()

    os.environ["DJANGO_SETTINGS_MODULE"] = "fedmem_site.settings.base"
    os.environ.setdefault("FEDMEM_LOG_LEVEL", "WARNING")
    os.environ["FEDMEM_DATA_DIR"] = tempfile.mkdtemp(prefix="fedmem-relations-")
    import django

    django.setup()
    from memory.extraction.causal import extract_relations
    from memory.extraction.nlp import parse

    info = machine()
    print(f"machine: {info['cores']} cores, {info['ram']} RAM, {info['cpu']}, load {info['load']}")
    found: dict[str, dict[str, list[list[str]]]] = {}
    for name, texts in texts_by_set(args.data).items():
        rows = {}
        for text, doc in zip(texts, parse(texts), strict=True):
            rels = [
                [rel.cause, rel.effect, rel.cue, extractor] for extractor, rel in extract_relations(text, doc)
            ]
            if rels:
                rows[text] = rels
        found[name] = rows
        cues = Counter(rel[2] for rels in rows.values() for rel in rels)
        total = sum(len(rels) for rels in rows.values())
        common = ", ".join(f"{cue} {n}" for cue, n in cues.most_common(8))
        print(f"{name}: {len(texts):,} texts, {len(rows):,} with a relation, {total:,} relations ({common})")
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text(json.dumps(found, ensure_ascii=False, indent=0), encoding="utf-8")
    if args.compare:
        before = json.loads(args.compare.read_text(encoding="utf-8"))
        lost: Counter[str] = Counter()
        gained: Counter[str] = Counter()
        changed = 0
        for name in found:
            old_rows, new_rows = before.get(name, {}), found[name]
            for text in sorted(set(old_rows) | set(new_rows)):
                old, new = old_rows.get(text, []), new_rows.get(text, [])
                if old == new:
                    continue
                changed += 1
                print(f"\n[{name}] {text}")
                for rel in old:
                    if rel not in new:
                        lost[rel[2]] += 1
                        print(f"  - {rel[0]!r} -> {rel[1]!r} ({rel[2]}, {rel[3]})")
                for rel in new:
                    if rel not in old:
                        gained[rel[2]] += 1
                        print(f"  + {rel[0]!r} -> {rel[1]!r} ({rel[2]}, {rel[3]})")
        print(f"\n{changed:,} texts changed; relations lost by cue: {dict(lost.most_common())}; "
              f"gained by cue: {dict(gained.most_common())}")  # fmt: skip


if __name__ == "__main__":
    main()
