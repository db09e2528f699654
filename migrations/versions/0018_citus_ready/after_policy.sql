-- B1 (issue 16): every protected table's policy without a sublink (dna.protect_table, dna.tenant_policy).
SELECT dna.protect_table(t) FROM dna.protected_tables() AS t;
