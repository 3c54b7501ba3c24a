-- facts_link_keys indexed every fact, and most facts link nothing: GIN
-- keeps a placeholder entry for an empty array, so every fact without
-- links added its row to one posting tree that every such insert decodes,
-- appends to and re-compresses. Measured on 100 batches of 1 000 link-less
-- rows into a table of 500 000 (5 % linked): 420–564 ms with the full
-- index, 195–290 ms with this partial one, 169–302 ms with none
-- (docs/benchmarks.md, "Session 9"). The index now holds linked facts
-- only, so every query that looks facts up by link says
-- `link_keys <> '{}'::text[]` beside its `link_keys && …` (an empty array
-- overlaps nothing, so the answer is the same): without it the planner
-- cannot use a partial index. A process of an earlier build, whose link
-- lookups do not say it, reads facts by a sequential scan until it is
-- replaced: roll every process over to this build together.
--
-- facts_linked_subject finds the linked facts on given subjects: a link
-- lookup wants the links of the facts on its subjects (FactsAbout's first
-- step, LinkedSubjects' first hop, retention's closure), and read them
-- from every fact on the subject through facts_subject, a whole history
-- per lookup for the few facts that link (a watched subject of 22 facts:
-- 2 200 rows read for 100 links). It holds linked facts only, so facts
-- without links cost ingest nothing here either.
--
-- The builds scan facts and hold ingest (a SHARE lock) while they run;
-- the old index is dropped after, in the same transaction.
CREATE INDEX facts_link_keys_linked ON facts USING gin (link_keys) WITH (fastupdate = off)
    WHERE link_keys <> '{}'::text[];
DROP INDEX facts_link_keys;
ALTER INDEX facts_link_keys_linked RENAME TO facts_link_keys;
CREATE INDEX facts_linked_subject ON facts (tenant_id, subject) WHERE link_keys <> '{}'::text[];
