#!/usr/bin/env python3
"""Writes migrations/0008_lexicon.sql from src/classify/lexicon.tsv (the file is the source).
Run only before the migration is released: once applied somewhere, add a new migration instead."""
import pathlib

root = pathlib.Path(__file__).resolve().parent.parent
CATEGORY = {
    "gpu": "hardware", "gpu_memory": "hardware", "nvlink": "hardware", "network": "hardware", "host": "hardware",
    "power": "hardware", "cooling": "hardware", "scheduler": "platform", "storage": "platform", "runtime": "platform",
    "driver": "platform", "framework": "platform", "code": "user", "config": "user", "oom": "user", "data": "user",
    "model": "user", "unknown": "unknown",
}
rows = []
for line in (root / "src/classify/lexicon.tsv").read_text().splitlines():
    if not line.strip() or line.startswith("#"):
        continue
    term, kind, component, weight, source = line.split("\t")
    w = float(weight)
    w = str(int(w)) if w == int(w) else repr(w)
    cat = CATEGORY[component] if kind in ("component", "fault") else "unknown"
    q = lambda s: s.replace("'", "''")
    rows.append(f"  ('{q(term)}', '{kind}', '{cat}', '{component}', {w}, '{q(source)}')")
sql = """-- The free-text lexicon: terms that name components, failures, healthy states and
-- symptoms, mapped onto the v1 taxonomy. Data, like the rules: admins edit it through
-- /v1/classification-terms, every edit bumps catalog_state.version and re-classifies all failures.
-- Generated from src/classify/lexicon.tsv by scripts/gen_lexicon_migration.py.
CREATE TABLE classification_terms (
    term       text             PRIMARY KEY,
    kind       text             NOT NULL CHECK (kind IN ('component', 'fault', 'failure', 'healthy', 'symptom')),
    category   text             NOT NULL CHECK (category IN ('hardware', 'platform', 'user', 'unknown')),
    component  text             NOT NULL,
    weight     double precision NOT NULL CHECK (weight > 0 AND weight <= 10),
    source     text             NOT NULL,
    builtin    boolean          NOT NULL DEFAULT true,
    updated_at timestamptz      NOT NULL DEFAULT now(),
    updated_by text             NULL
);

INSERT INTO classification_terms (term, kind, category, component, weight, source)
VALUES
""" + ",\n".join(rows) + ";\n"
(root / "migrations/0008_lexicon.sql").write_text(sql)
print(len(rows), "terms")
