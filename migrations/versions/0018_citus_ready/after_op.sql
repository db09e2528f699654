-- Named to fire before dna_instances_before_write (triggers of one event fire in name order).
CREATE TRIGGER dna_instances_before_op BEFORE UPDATE OF op ON dna.dna_instances
    FOR EACH ROW EXECUTE FUNCTION dna.instances_op_named();
