"""Charts, live explorers and attention views, drawn with no network."""
