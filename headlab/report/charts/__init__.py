"""The book's Altair charts, one module per group of pages. Each takes a tidy table that a notebook saved, so the
figure and the file agree; a notebook calls them as ``charts.head_heatmap(...)``."""

from headlab.report.charts.circuit import circuit_graph
from headlab.report.charts.compression import speed_bars, students
from headlab.report.charts.heads import (
    attention_cells,
    attention_heatmap,
    head_heatmap,
    head_intervals,
    importance_scatter,
    layer_bars,
    symmetric_scale,
)
from headlab.report.charts.matching import claim_intervals, cls_bars, condition_effects, draws_against, map_panels
from headlab.report.charts.scorecard import SIZES_SHOWN, VERDICT_COLOURS, claims_in_sizes, verdict_grid
from headlab.report.charts.setup import class_balance, confusion, share_curve, training_history
from headlab.report.charts.towers import condition_accuracy
from headlab.report.charts.words import (
    boundary_heads,
    boundary_rule,
    grade_distributions,
    grade_shares,
    grade_shift,
    shuffle_sensitivity,
    union_curve,
)

__all__ = [
    "SIZES_SHOWN",
    "VERDICT_COLOURS",
    "attention_cells",
    "attention_heatmap",
    "boundary_heads",
    "boundary_rule",
    "circuit_graph",
    "claim_intervals",
    "claims_in_sizes",
    "class_balance",
    "cls_bars",
    "condition_accuracy",
    "condition_effects",
    "confusion",
    "draws_against",
    "grade_distributions",
    "grade_shares",
    "grade_shift",
    "head_heatmap",
    "head_intervals",
    "importance_scatter",
    "layer_bars",
    "map_panels",
    "share_curve",
    "shuffle_sensitivity",
    "speed_bars",
    "students",
    "symmetric_scale",
    "training_history",
    "union_curve",
    "verdict_grid",
]
