-- Topic receipts: receipts are never rewritten; roles granted before this revision get the table.
CREATE TRIGGER dna_search_receipts_immutable BEFORE UPDATE ON dna.dna_search_receipts
    FOR EACH ROW EXECUTE FUNCTION dna.receipts_immutable();
DO $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT DISTINCT a.grantee::regrole::text
             FROM pg_catalog.pg_class AS c, aclexplode(c.relacl) AS a
             WHERE c.oid = 'dna.dna_search_docs_384'::regclass AND a.privilege_type = 'INSERT'
               AND a.grantee <> c.relowner AND a.grantee <> 0
             ORDER BY 1 LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON dna.dna_search_receipts TO %s', r);
    END LOOP;
END
$$;
