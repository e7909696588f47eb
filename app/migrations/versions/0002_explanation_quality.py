"""explanation quality: stability and faithfulness figures beside LIME's fit

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FLOAT_COLUMNS = (
    "stability",
    "comprehensiveness",
    "sufficiency",
    "random_comprehensiveness",
    "random_sufficiency",
    "normalised_comprehensiveness",
    "normalised_sufficiency",
    "comprehensiveness_top",
    "sufficiency_top",
    "random_comprehensiveness_top",
    "random_sufficiency_top",
)


def upgrade() -> None:
    with op.batch_alter_table("explanations") as batch_op:
        batch_op.add_column(sa.Column("target", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("top_k", sa.Integer(), nullable=True))
        for name in FLOAT_COLUMNS:
            batch_op.add_column(sa.Column(name, sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("explanations") as batch_op:
        for name in ("target", "top_k", *FLOAT_COLUMNS):
            batch_op.drop_column(name)
