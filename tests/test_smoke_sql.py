def test_migrated(sql):
    assert sql.execute("select count(*) from dna.dna_kinds").fetchone()[0] == 3
