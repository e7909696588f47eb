"""catalogue version: a count the database moves whenever the catalogue's rows change

The one-row table catalogue_version holds a number that triggers add one to in the same
transaction as every insert, update or delete of movies, reviews, predictions and
explanations (an explanation's weights are written in its transaction), so a reader that
sees the new number sees the new rows too. ``app.web.catalogue_cache`` keeps the figures of the
whole catalogue until the number moves. (SQLite recreates a table that a batch migration
alters, without its triggers: a later migration that alters one of these tables in batch
mode creates its trigger again.)

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("movies", "reviews", "predictions", "explanations")
BUMP = "UPDATE catalogue_version SET version = version + 1 WHERE id = 1"


def upgrade() -> None:
    op.create_table(
        "catalogue_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute("INSERT INTO catalogue_version (id, version) VALUES (1, 0)")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE OR REPLACE FUNCTION textflix_catalogue_changed() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN {BUMP}; RETURN NULL; END $$"
        )
        for table in TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_catalogue_changed AFTER INSERT OR UPDATE OR DELETE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION textflix_catalogue_changed()"
            )
    else:  # SQLite: one trigger per table and kind of change, run once per row
        for table in TABLES:
            for change in ("INSERT", "UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_{change.lower()}_catalogue_changed AFTER {change} ON {table} "
                    f"BEGIN {BUMP}; END"
                )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER {table}_catalogue_changed ON {table}")
        op.execute("DROP FUNCTION textflix_catalogue_changed()")
    else:
        for table in TABLES:
            for change in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER {table}_{change}_catalogue_changed")
    op.drop_table("catalogue_version")
