-- Every classification says why: the rule id or the lexicon terms that decided.
-- Filled by the next rebuild (ingest of the key, or any catalog edit).
ALTER TABLE failures ADD COLUMN explanation text NOT NULL DEFAULT '';
