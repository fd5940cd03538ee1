"""The look every chart shares, on the site and in notebooks: one palette (a candidate keeps its colour from chart
to chart), white paper, light grid."""

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
LAYOUT = {
    "paper_bgcolor": "white", "plot_bgcolor": "white", "height": 380,
    "margin": {"t": 50, "b": 45, "l": 60, "r": 20},
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "legend": {"title": {"text": "candidate / prompts"}},
}
AXIS = {"gridcolor": "#e5e7eb", "zerolinecolor": "#d1d5db", "linecolor": "#9ca3af"}
