"""item ids: movies.title_id and reviews.title_id take the ids of a user's own items, up to 64 characters

A user's file of reviews (--reviews) names its items by its own ids, longer than IMDB's (Skytrax's
airline slugs reach 35 characters). Only PostgreSQL enforces a column's length: on SQLite the
columns already hold any length, and altering them in batch mode would recreate the tables
without their triggers (migration 0004), so nothing changes there.

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (("movies", "title_id"), ("reviews", "title_id"))


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, column in COLUMNS:
            op.alter_column(table, column, type_=sa.String(64), existing_type=sa.String(16), existing_nullable=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, column in COLUMNS:
            op.alter_column(table, column, type_=sa.String(16), existing_type=sa.String(64), existing_nullable=False)
