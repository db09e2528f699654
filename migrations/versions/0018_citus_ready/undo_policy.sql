-- The policy of 0009_tenancy .. 0017 (an InitPlan: the scalar subquery).
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT dna.protected_tables() LOOP
        EXECUTE format('DROP POLICY IF EXISTS dna_tenant_isolation ON %s', t);
        EXECUTE format('CREATE POLICY dna_tenant_isolation ON %s AS PERMISSIVE FOR ALL TO PUBLIC '
                       'USING (dna.tenant_visible(tenant, (SELECT dna.visible_tenants()))) '
                       'WITH CHECK (dna.tenant_visible(tenant, (SELECT dna.visible_tenants())))', t);
        EXECUTE format('COMMENT ON POLICY dna_tenant_isolation ON %s IS %L', t,
                       'INV-PERSONAL: a row is visible and writable only when its tenant is in dna.visible_tenants() '
                       '(the shared base, the caller''s own personal partition, the workspaces it is a member of).');
    END LOOP;
END
$$;
