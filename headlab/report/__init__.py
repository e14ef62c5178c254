"""Charts, live explorers and attention views, drawn with no network.

from headlab.report import charts, head_view, show
"""

from headlab.core.exports import exports as _exports

_PUBLIC = {
    "charts": "headlab.report.charts",  # the module: charts.head_heatmap(...)
    "live_explorer": "headlab.report.compare_explorer",
    "attention_table": "headlab.report.explore",
    "head_explorer": "headlab.report.explore",
    "head_explorer_chart": "headlab.report.explore",
    "case_texts": "headlab.report.explore_words",
    "order_explorer": "headlab.report.explore_words",
    "segmentation_explorer": "headlab.report.explore_words",
    "show": "headlab.report.render",
    "head_view": "headlab.report.views",
}
__all__, __getattr__, __dir__ = _exports(__name__, _PUBLIC)
