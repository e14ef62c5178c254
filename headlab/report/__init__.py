"""Charts, live explorers and attention views, drawn with no network.

from headlab.report import charts, head_view, show
"""

from headlab.report import charts
from headlab.report.compare_explorer import live_explorer
from headlab.report.explore import attention_table, head_explorer, head_explorer_chart
from headlab.report.explore_words import case_texts, order_explorer, segmentation_explorer
from headlab.report.render import Figures, show
from headlab.report.standing import standing_page
from headlab.report.views import head_view

__all__ = [
    "Figures",
    "attention_table",
    "case_texts",
    "charts",
    "head_explorer",
    "head_explorer_chart",
    "head_view",
    "live_explorer",
    "order_explorer",
    "segmentation_explorer",
    "show",
    "standing_page",
]
