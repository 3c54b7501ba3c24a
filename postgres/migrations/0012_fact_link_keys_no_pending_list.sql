-- Facts are found by link through the GIN index facts_link_keys. With
-- GIN's default fastupdate, new entries go to a pending list that every
-- lookup reads whole until (auto)vacuum or 4 MB of them merge it into the
-- index: measured by `commitlayer bench scale` after a million facts, 193
-- pending pages (50 123 entries) made every link lookup of a pass read
-- ~175 buffers and take 2–9 ms for no row, twice per FactsAbout and once
-- per LinkedSubjects. A fact has few links, so updating the index in place
-- costs ingest little; lookups then read a few pages.
ALTER INDEX facts_link_keys SET (fastupdate = off);
SELECT gin_clean_pending_list('facts_link_keys'::regclass);
