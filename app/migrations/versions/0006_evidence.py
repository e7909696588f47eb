"""evidence: the passages annotators marked in ERASER's movie reviews (--rationales)

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evidence",
        sa.Column("review_id", sa.Integer(), sa.ForeignKey("reviews.id"), primary_key=True),
        sa.Column("start_token", sa.Integer(), primary_key=True),
        sa.Column("end_token", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("evidence")
