-- Topic policy_inline: the one-node policy of 0018 .. 0020 (dna.tenant_visible called with the InitPlan)
-- on every protected table, as 0020's dna.protect_table made it; where the citus extension is installed
-- the upgrade left the policies in Citus's form, and they stay.
DO $$
DECLARE
    t regclass;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS e WHERE e.extname = 'citus') THEN
        RETURN;
    END IF;
    FOR t IN SELECT dna.protected_tables() LOOP
        EXECUTE format('DROP POLICY IF EXISTS dna_tenant_isolation ON %s', t);
        EXECUTE format('CREATE POLICY dna_tenant_isolation ON %s AS PERMISSIVE FOR ALL TO PUBLIC '
                       'USING (tenant = '''' OR dna.tenant_visible(tenant, (SELECT dna.visible_tenants()))) '
                       'WITH CHECK (tenant = '''' OR dna.tenant_visible(tenant, (SELECT dna.visible_tenants())))', t);
        EXECUTE format('COMMENT ON POLICY dna_tenant_isolation ON %s IS %L', t,
                       'INV-PERSONAL: a row is visible and writable only when its tenant is in dna.visible_tenants() '
                       '(the shared base, the caller''s own personal partition, the workspaces it is a member of).');
    END LOOP;
END
$$;
