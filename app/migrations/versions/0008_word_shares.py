"""word shares: BERT's share of each word of a sentence (model.word_shares), stored once computed

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "word_shares",
        sa.Column("sentence_id", sa.Integer(), sa.ForeignKey("sentences.id"), primary_key=True),
        sa.Column("model", sa.String(16), primary_key=True),
        sa.Column("position", sa.Integer(), primary_key=True),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("end", sa.Integer(), nullable=False),
        sa.Column("share", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("word_shares")
