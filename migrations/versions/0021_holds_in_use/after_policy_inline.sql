-- Topic policy_inline (issue 26 item 4): every protected table's policy in dna.tenant_policy()'s new
-- one-node form (dna.tenant_visible's test written out inline, the list an InitPlan). Where the citus
-- extension is installed the form is unchanged (no sublink: dna.tenant_visible(tenant,
-- dna.visible_tenants())), and the policies are left as they are.
SELECT dna.protect_table(t) FROM dna.protected_tables() AS t
WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS e WHERE e.extname = 'citus');
