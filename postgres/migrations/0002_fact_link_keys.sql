-- Facts are found by link through link_keys: each link prefixed with the
-- tenant id ("t_abc order:o1"), under a plain GIN index. A GIN index on
-- (tenant_id, links) has to walk every entry of the tenant's id and grows
-- slower with the tenant; a GIN index on links alone mixes tenants that
-- share subject names (every sandbox tenant has order:o_1001).
-- (An early 0001 created facts_links with btree_gin; drop it if present.)
DROP INDEX IF EXISTS facts_links;
ALTER TABLE facts ADD COLUMN link_keys text[] NOT NULL DEFAULT '{}';
UPDATE facts SET link_keys = ARRAY(SELECT tenant_id || ' ' || l FROM unnest(links) AS l)
WHERE cardinality(links) > 0;
ALTER TABLE facts ADD CONSTRAINT facts_link_keys_match CHECK (cardinality(link_keys) = cardinality(links));
CREATE INDEX facts_link_keys ON facts USING gin (link_keys);
