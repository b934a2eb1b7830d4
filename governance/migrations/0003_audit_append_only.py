from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION fedmem_audit_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the audit trail is append-only: % refused on %', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER audit_event_append_only
    BEFORE UPDATE OR DELETE ON governance_auditevent
    FOR EACH ROW EXECUTE FUNCTION fedmem_audit_refuse_change();
"""

REVERSE = """
DROP TRIGGER IF EXISTS audit_event_append_only ON governance_auditevent;
DROP FUNCTION IF EXISTS fedmem_audit_refuse_change();
"""


class Migration(migrations.Migration):
    """The database itself refuses UPDATE and DELETE on audit events."""

    dependencies = [("governance", "0002_add_audit_trail")]
    operations = [migrations.RunSQL(FORWARD, REVERSE)]
